// tests/core/test_views.cpp: the zero-copy views of core/src/ops/views.cpp (view, reshape,
// flatten, transpose, t, permute, slice, narrow, select, unsqueeze, squeeze, expand,
// contiguous): they share storage (checked through data_ptr and the version counter), copy only
// when they must, give torch's values and strides, and fail with clear messages. Gradient
// checks for every view are rows in gradcheck_rows_shape.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "error_message.h"
#include "xgrad/xgrad.h"

namespace xgrad {
namespace {

using testing::error_of;

Tensor iota(const Shape& shape) { return arange(0, double(numel_of(shape)), 1, kFloat32).reshape(shape); }

bool shares_storage(const Tensor& a, const Tensor& b) { return a.impl()->storage == b.impl()->storage; }

TEST(Views, ShareStorageAndCopyNothing) {
  Tensor x = iota({2, 3, 4});
  const float* p = x.data_ptr<float>();
  EXPECT_EQ(x.view({6, 4}).data_ptr<float>(), p);
  EXPECT_EQ(x.view({-1}).data_ptr<float>(), p);
  EXPECT_EQ(x.reshape({4, 6}).data_ptr<float>(), p);
  EXPECT_EQ(x.flatten(1).data_ptr<float>(), p);
  EXPECT_EQ(x.transpose(0, 2).data_ptr<float>(), p);
  EXPECT_EQ(x.permute({2, 0, 1}).data_ptr<float>(), p);
  EXPECT_EQ(x.slice(2, 1, 3).data_ptr<float>(), p + 1);
  EXPECT_EQ(x.narrow(1, 2, 1).data_ptr<float>(), p + 8);
  EXPECT_EQ(x.select(0, 1).data_ptr<float>(), p + 12);
  EXPECT_EQ(x[1][2].data_ptr<float>(), p + 20);
  EXPECT_EQ(x.unsqueeze(1).data_ptr<float>(), p);
  EXPECT_EQ(x.unsqueeze(0).squeeze().data_ptr<float>(), p);
  EXPECT_EQ(x.slice(0, 0, 1).expand({5, 3, 4}).data_ptr<float>(), p);
  EXPECT_EQ(x.contiguous().data_ptr<float>(), p);  // already contiguous: the same tensor
  EXPECT_EQ(x.detach().data_ptr<float>(), p);
  for (const Tensor& v : {x.view({24}), x.transpose(0, 1), x.select(2, 3), x.expand({2, 2, 3, 4})})
    EXPECT_TRUE(shares_storage(v, x));
  // a write through a view is seen by the base, and bumps the shared version counter
  Tensor v = x.select(0, 1).select(0, 0);  // x[1][0]
  const uint64_t before = x.version();
  v.fill_(-1.0);
  EXPECT_EQ(x.version(), before + 1);
  EXPECT_EQ(x.slice(0, 1, 2).slice(1, 0, 1).to_vector<float>(), std::vector<float>(4, -1.0f));
  EXPECT_EQ(x.to_vector<float>()[11], 11.0f);
}

TEST(Views, StridesLikeTorch) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(x.transpose(0, 2).strides(), (Shape{1, 4, 12}));
  EXPECT_EQ(x.permute({1, 2, 0}).strides(), (Shape{4, 1, 12}));
  EXPECT_EQ(x.slice(2, 0, 4, 2).strides(), (Shape{12, 4, 2}));
  EXPECT_EQ(x.slice(2, 0, 4, 2).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(x.select(1, 2).strides(), (Shape{12, 1}));
  EXPECT_EQ(x.unsqueeze(1).strides(), (Shape{12, 12, 4, 1}));
  EXPECT_EQ(x.unsqueeze(-1).strides(), (Shape{12, 4, 1, 1}));
  EXPECT_EQ(x.slice(1, 0, 1).expand({2, 5, 4}).strides(), (Shape{12, 0, 1}));
  EXPECT_EQ(x.select(0, 0).expand({3, 3, 4}).strides(), (Shape{0, 4, 1}));
  EXPECT_EQ(x.transpose(1, 2).storage_offset(), 0);
  EXPECT_EQ(x.narrow(2, 1, 2).storage_offset(), 1);
  EXPECT_FALSE(x.transpose(0, 1).is_contiguous());
  EXPECT_TRUE(x.unsqueeze(0).is_contiguous());
  EXPECT_TRUE(x.slice(0, 1, 2).is_contiguous());
}

TEST(Views, ViewOfANonContiguousTensorThrowsAHelpfulMessage) {
  Tensor x = iota({2, 3, 4});
  Tensor t = x.transpose(1, 2);  // (2, 4, 3), strides (12, 1, 4)
  std::string m = error_of([&] { t.view({2, 12}); });
  EXPECT_MESSAGE_HAS(m, "view");
  EXPECT_MESSAGE_HAS(m, "[2, 4, 3]");   // shape
  EXPECT_MESSAGE_HAS(m, "[12, 1, 4]");  // strides
  EXPECT_MESSAGE_HAS(m, ".contiguous()");
  EXPECT_MESSAGE_HAS(m, ".reshape(");
  // but views that keep the non-contiguous dims apart are fine (torch allows them too)
  EXPECT_EQ(t.view({2, 4, 3, 1}).shape(), (Shape{2, 4, 3, 1}));
  EXPECT_EQ(x.slice(2, 0, 2).view({2, 3, 2}).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(t.contiguous().view({2, 12}).shape(), (Shape{2, 12}));
  // the multi-head attention split: (b, T, d_out) -> (b, T, H, D) -> (b, H, T, D)
  Tensor heads = iota({2, 5, 6}).view({2, 5, 3, 2}).transpose(1, 2);
  EXPECT_EQ(heads.shape(), (Shape{2, 3, 5, 2}));
  EXPECT_THROW(heads.view({2, 3, 10}), Error);
  EXPECT_EQ(heads.transpose(1, 2).contiguous().view({2, 5, 6}).to_vector<float>(),
            iota({2, 5, 6}).to_vector<float>());
}

TEST(Views, ReshapeCopiesOnlyWhenNeeded) {
  Tensor x = iota({3, 4});
  Tensor r = x.reshape({2, 6});
  EXPECT_TRUE(shares_storage(r, x));
  Tensor t = x.t();            // (4, 3) non-contiguous
  Tensor c = t.reshape({12});  // must copy
  EXPECT_FALSE(shares_storage(c, x));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_TRUE(shares_storage(t.reshape({4, 3, 1}), x));  // representable: no copy
  EXPECT_TRUE(shares_storage(t.flatten(0, 0), x));
  EXPECT_FALSE(shares_storage(t.flatten(), x));
  Tensor nc = t.contiguous();
  EXPECT_FALSE(shares_storage(nc, x));
  EXPECT_TRUE(nc.is_contiguous());
  EXPECT_EQ(nc.to_vector<float>(), c.to_vector<float>());
}

TEST(Views, InferredSizesAndFlatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.view({-1, 4}).shape(), (Shape{6, 4}));
  EXPECT_EQ(x.reshape({2, -1}).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten().shape(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).shape(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).shape(), (Shape{6, 4}));
  EXPECT_EQ(scalar_tensor(3.0).flatten().shape(), (Shape{1}));
  EXPECT_EQ(zeros({0, 3}).view({-1, 3}).shape(), (Shape{0, 3}));
  EXPECT_EQ(scalar_tensor(3.0).view({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(ones({1, 1}).view({}).shape(), (Shape{}));
}

TEST(Views, ValuesOfSliceSelectNarrowPermute) {
  Tensor x = iota({3, 4});  // [[0..3], [4..7], [8..11]]
  EXPECT_EQ(x.slice(1, 1, 3).to_vector<float>(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(x.slice(1, 0, 4, 3).to_vector<float>(), (std::vector<float>{0, 3, 4, 7, 8, 11}));
  EXPECT_EQ(x.slice(0, -2, 100).to_vector<float>(), (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(x.slice(1, -1, 4).to_vector<float>(), (std::vector<float>{3, 7, 11}));  // x[:, -1:]
  EXPECT_EQ(x.slice(0, 2, 1).shape(), (Shape{0, 4}));                               // empty like Python
  EXPECT_EQ(x.select(1, -1).to_vector<float>(), (std::vector<float>{3, 7, 11}));
  EXPECT_EQ(x.select(0, 1).to_vector<float>(), (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(x.narrow(0, 1, 2).to_vector<float>(), (std::vector<float>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(x.narrow(1, -1, 1).to_vector<float>(), (std::vector<float>{3, 7, 11}));
  EXPECT_EQ(x.t().to_vector<float>(), (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  EXPECT_EQ(x[2][3].item(), 11.0);
  Tensor y = iota({2, 3, 4});
  EXPECT_EQ(y.permute({2, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(y.permute({2, 0, 1})[1].to_vector<float>(), (std::vector<float>{1, 5, 9, 13, 17, 21}));
  EXPECT_EQ(y.permute({-1, 0, 1}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(y.transpose(-1, 0).shape(), (Shape{4, 3, 2}));
  // views of views
  EXPECT_EQ(y.transpose(0, 2).slice(0, 1, 2).select(2, 1).to_vector<float>(),
            (std::vector<float>{13, 17, 21}));
}

TEST(Views, UnsqueezeSqueezeExpand) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(x.unsqueeze(2).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-3).shape(), (Shape{1, 2, 3}));
  Tensor y = zeros({1, 2, 1, 3, 1});
  EXPECT_EQ(y.squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(y.squeeze(2).shape(), (Shape{1, 2, 3, 1}));
  EXPECT_EQ(y.squeeze(1).shape(), (Shape{1, 2, 1, 3, 1}));  // size 2: unchanged, like torch
  EXPECT_EQ(y.squeeze(-1).shape(), (Shape{1, 2, 1, 3}));
  EXPECT_EQ(scalar_tensor(1.0).squeeze().shape(), (Shape{}));
  EXPECT_EQ(scalar_tensor(1.0).unsqueeze(0).shape(), (Shape{1}));
  Tensor col = tensor({1.0, 2.0}).unsqueeze(1);  // (2, 1)
  Tensor e = col.expand({2, 3});
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(col.expand({4, -1, 3}).shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(col.expand_as(zeros({2, 5})).shape(), (Shape{2, 5}));
  EXPECT_EQ(col.expand({2, 1}).strides(), col.strides());
}

TEST(Views, Errors) {
  Tensor x = iota({2, 3});
  std::string m = error_of([&] { x.view({4, 2}); });
  EXPECT_MESSAGE_HAS(m, "view");
  EXPECT_MESSAGE_HAS(m, "[4, 2]");
  EXPECT_MESSAGE_HAS(m, "6");
  EXPECT_THROW(x.view({-1, -1}), Error);
  EXPECT_THROW(x.view({-1, 4}), Error);
  EXPECT_THROW(x.reshape({-2, 3}), Error);
  m = error_of([&] { x.transpose(0, 2); });
  EXPECT_MESSAGE_HAS(m, "transpose");
  EXPECT_MESSAGE_HAS(m, "[2, 3]");
  EXPECT_THROW(iota({2, 2, 2}).t(), Error);
  EXPECT_THROW(x.permute({0}), Error);
  EXPECT_THROW(x.permute({0, 0}), Error);
  EXPECT_THROW(x.permute({0, 2}), Error);
  EXPECT_THROW(x.slice(2, 0, 1), Error);
  EXPECT_THROW(x.slice(1, 0, 3, 0), Error);
  EXPECT_THROW(x.slice(1, 0, 3, -1), Error);
  EXPECT_THROW(scalar_tensor(1.0).slice(0, 0, 1), Error);
  m = error_of([&] { x.select(1, 3); });
  EXPECT_MESSAGE_HAS(m, "select");
  EXPECT_MESSAGE_HAS(m, "index 3");
  EXPECT_MESSAGE_HAS(m, "[2, 3]");
  EXPECT_THROW(x.select(1, -4), Error);
  EXPECT_THROW(x[2], Error);
  EXPECT_THROW(scalar_tensor(1.0).select(0, 0), Error);
  m = error_of([&] { x.narrow(1, 2, 2); });
  EXPECT_MESSAGE_HAS(m, "narrow");
  EXPECT_THROW(x.narrow(1, 0, -1), Error);
  EXPECT_THROW(x.unsqueeze(3), Error);
  EXPECT_THROW(x.unsqueeze(-4), Error);
  EXPECT_THROW(x.squeeze(2), Error);
  m = error_of([&] { x.expand({2, 4}); });
  EXPECT_MESSAGE_HAS(m, "expand");
  EXPECT_MESSAGE_HAS(m, "[2, 3]");
  EXPECT_MESSAGE_HAS(m, "[2, 4]");
  EXPECT_THROW(x.expand({3}), Error);
  EXPECT_THROW(x.expand({-1, 2, 3}), Error);
  EXPECT_THROW(x.flatten(1, 0), Error);
  EXPECT_THROW(Tensor().view({1}), Error);
}

TEST(Views, GradFnNamesLikeTorch) {
  Tensor x = iota({2, 3}).requires_grad_();
  EXPECT_EQ(x.view({3, 2}).grad_fn_name(), "ViewBackward0");
  EXPECT_EQ(x.transpose(0, 1).grad_fn_name(), "TransposeBackward0");
  EXPECT_EQ(x.permute({1, 0}).grad_fn_name(), "PermuteBackward0");
  EXPECT_EQ(x.slice(1, 0, 2).grad_fn_name(), "SliceBackward0");
  EXPECT_EQ(x.select(0, 1).grad_fn_name(), "SelectBackward0");
  EXPECT_EQ(x.unsqueeze(0).grad_fn_name(), "UnsqueezeBackward0");
  EXPECT_EQ(x.unsqueeze(0).squeeze().grad_fn_name(), "SqueezeBackward0");
  EXPECT_EQ(x.unsqueeze(0).expand({4, 2, 3}).grad_fn_name(), "ExpandBackward0");
  EXPECT_EQ(x.t().contiguous().grad_fn_name(), "CloneBackward0");
}

}  // namespace
}  // namespace xgrad
