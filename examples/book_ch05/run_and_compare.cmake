# examples/book_ch05/run_and_compare.cmake: runs COMMAND (a ;-list) and fails unless it exits
# 0 and its standard output equals the file EXPECTED byte for byte.
#   cmake -DCOMMAND="prog;--flag" -DEXPECTED=file -P run_and_compare.cmake
execute_process(COMMAND ${COMMAND} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "exit status ${rc}\n${out}${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "output differs from ${EXPECTED}\n--- got:\n${out}--- expected:\n${expected}")
endif()
