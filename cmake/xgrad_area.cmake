# cmake/xgrad_area.cmake: xgrad_add_area(), how every layer of the library is built.
#
#   xgrad_add_area(<area> [KERNELS] [DEPENDS <xgrad::lower areas>...] [PRIVATE <targets>...]
#                  [HEADERS <header-only targets>...])
#
# called from <area>/CMakeLists.txt builds <area>/src/**.cpp into the library xgrad_<area>
# (alias xgrad::<area>, installed and exported as xgrad::<area>). Its public headers are
# <area>/include/xgrad/...; <area>/src is on its own include path only, so a private header
# cannot be reached from another area: what a layer needs from the one below is public API,
# and the build enforces it. DEPENDS links the public interface of the areas below (PUBLIC,
# so users of this area get them too); PRIVATE links what only the sources use. HEADERS puts
# header-only libraries (xsimd, nlohmann_json::nlohmann_json) on the private include path
# only, so they stay out of the installed package. KERNELS links xgrad_kernels, the kernel
# floor (core/src/kernels/: every SIMD loop, see core/CMakeLists.txt), privately and for the
# build only: it is neither installed nor exported, and no installed header includes it.
# Every area gets the same warnings and -march flags, and joins the umbrella target
# xgrad::xgrad (the root CMakeLists.txt creates it after the last area).
#
# A new area is a folder with include/, src/ and a two-line CMakeLists.txt, plus one
# add_subdirectory() line in the root CMakeLists.txt.
function(xgrad_add_area area)
  cmake_parse_arguments(ARG "KERNELS" "" "DEPENDS;PRIVATE;HEADERS" ${ARGN})
  set(target xgrad_${area})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  add_library(${target} ${sources})
  add_library(xgrad::${area} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${area})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC ${ARG_DEPENDS})
  if(ARG_KERNELS)
    target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:xgrad_kernels>)
  endif()
  if(ARG_PRIVATE)
    target_link_libraries(${target} PRIVATE ${ARG_PRIVATE})
  endif()
  foreach(lib ${ARG_HEADERS})
    get_target_property(dirs ${lib} INTERFACE_INCLUDE_DIRECTORIES)
    target_include_directories(${target} PRIVATE ${dirs})
  endforeach()
  target_compile_features(${target} PUBLIC cxx_std_20)  # users of the headers need C++20 too
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  # GCC 12 false positives: AVX-512 intrinsics (xsimd) trip -Wmaybe-uninitialized, inlined
  # std::string code trips -Wrestrict.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized -Wno-restrict)
  endif()
  if(XGRAD_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
  set_property(GLOBAL APPEND PROPERTY XGRAD_AREAS ${target})
  if(XGRAD_INSTALL)
    install(TARGETS ${target} EXPORT xgradTargets
      ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
      RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
      INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    # each include/ holds an xgrad/ subfolder; they merge into <prefix>/include/xgrad/
    install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/
      DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
  endif()
endfunction()
