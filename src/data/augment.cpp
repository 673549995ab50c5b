// Augmentation maths: crop boxes and the fused resample/normalise kernels (uint8 HWC -> float HWC).
#include "nostrum/data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "nostrum/core/error.hpp"

namespace nostrum::data {

void validate(const AugmentConfig& c) {
  const auto bad = [](const std::string& what, const std::string& field) {
    throw OptionError(what, "augmentation option " + field);
  };
  if (c.out_height <= 0 || c.out_width <= 0)
    bad("output size must be positive", "out_height/out_width");
  if (c.out_channels != 1 && c.out_channels != 3)
    bad("output channels must be 1 or 3", "out_channels");
  if (!(c.min_scale > 0 && c.min_scale <= c.max_scale && c.max_scale <= 1))
    bad("need 0 < min_scale <= max_scale <= 1", "scale");
  if (!(c.min_ratio > 0 && c.min_ratio <= c.max_ratio))
    bad("need 0 < min_ratio <= max_ratio", "ratio");
  if (c.eval_resize < std::min(c.out_height, c.out_width))
    bad("eval_resize must be >= the output size", "eval_resize");
  if (c.pad < 0) bad("pad must be >= 0", "pad");
  if (static_cast<int>(c.mean.size()) != c.out_channels ||
      static_cast<int>(c.std.size()) != c.out_channels)
    bad("mean and std need one value per output channel", "mean/std");
  for (float s : c.std)
    if (!(s > 0)) bad("std values must be positive", "std");
}

CropBox random_resized_crop(SampleRng& rng, int height, int width, const AugmentConfig& c) {
  const float area = static_cast<float>(height) * static_cast<float>(width);
  const float log_lo = std::log(c.min_ratio), log_hi = std::log(c.max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const float target_area = area * rng.uniform(c.min_scale, c.max_scale);
    const float ratio = std::exp(rng.uniform(log_lo, log_hi));
    const int w = static_cast<int>(std::lround(std::sqrt(target_area * ratio)));
    const int h = static_cast<int>(std::lround(std::sqrt(target_area / ratio)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const int y = static_cast<int>(rng.below(static_cast<uint64_t>(height - h + 1)));
      const int x = static_cast<int>(rng.below(static_cast<uint64_t>(width - w + 1)));
      return {float(y), float(x), float(h), float(w)};
    }
  }
  // Fallback: whole image, ratio clamped (as torchvision).
  const float in_ratio = static_cast<float>(width) / static_cast<float>(height);
  float w = float(width), h = float(height);
  if (in_ratio < c.min_ratio) {
    h = std::round(w / c.min_ratio);
  } else if (in_ratio > c.max_ratio) {
    w = std::round(h * c.max_ratio);
  }
  return {std::floor((height - h) / 2), std::floor((width - w) / 2), h, w};
}

CropBox centre_crop(int height, int width, const AugmentConfig& c) {
  const float scale =
      static_cast<float>(c.eval_resize) / static_cast<float>(std::min(height, width));
  const float h = std::min(float(height), c.out_height / scale);
  const float w = std::min(float(width), c.out_width / scale);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

void resample_normalise(float* out, const uint8_t* src, int src_h, int src_w, int src_c,
                        const CropBox& box, bool flip, const AugmentConfig& c) {
  const int oh = c.out_height, ow = c.out_width, oc = c.out_channels;
  const float sy = box.height / oh, sx = box.width / ow;
  float scale[3], shift[3];
  for (int k = 0; k < oc; ++k) {
    scale[k] = 1.0f / (255.0f * c.std[k]);
    shift[k] = -c.mean[k] / c.std[k];
  }
  // Horizontal taps once per output column: x0, x1 and the weight of x1.
  std::vector<int> x0(ow), x1(ow);
  std::vector<float> wx(ow);
  for (int j = 0; j < ow; ++j) {
    const int jj = flip ? ow - 1 - j : j;
    float fx = box.x + (jj + 0.5f) * sx - 0.5f;
    fx = std::clamp(fx, 0.0f, float(src_w - 1));
    x0[j] = static_cast<int>(fx);
    x1[j] = std::min(x0[j] + 1, src_w - 1);
    wx[j] = fx - x0[j];
  }
  for (int i = 0; i < oh; ++i) {
    float fy = box.y + (i + 0.5f) * sy - 0.5f;
    fy = std::clamp(fy, 0.0f, float(src_h - 1));
    const int y0 = static_cast<int>(fy), y1 = std::min(y0 + 1, src_h - 1);
    const float wy = fy - y0;
    const uint8_t* r0 = src + static_cast<size_t>(y0) * src_w * src_c;
    const uint8_t* r1 = src + static_cast<size_t>(y1) * src_w * src_c;
    float* o = out + static_cast<size_t>(i) * ow * oc;
    for (int j = 0; j < ow; ++j) {
      const int a = x0[j] * src_c, b = x1[j] * src_c;
      const float w1 = wx[j], w0 = 1.0f - w1;
      for (int k = 0; k < oc; ++k) {
        const int sk = src_c == 1 ? 0 : k;
        const float top = w0 * r0[a + sk] + w1 * r0[b + sk];
        const float bottom = w0 * r1[a + sk] + w1 * r1[b + sk];
        o[j * oc + k] = (top + wy * (bottom - top)) * scale[k] + shift[k];
      }
    }
  }
}

void pad_crop_normalise(float* out, const uint8_t* src, int h, int w, int c, int pad, int dy,
                        int dx, bool flip, const AugmentConfig& config) {
  for (int i = 0; i < h; ++i) {
    const int y = i + dy - pad;
    for (int j = 0; j < w; ++j) {
      const int x = (flip ? w - 1 - j : j) + dx - pad;
      const bool inside = y >= 0 && y < h && x >= 0 && x < w;
      for (int k = 0; k < c; ++k) {
        const float v = inside ? src[(static_cast<size_t>(y) * w + x) * c + k] : 0.0f;
        out[(static_cast<size_t>(i) * w + j) * c + k] =
            (v / 255.0f - config.mean[k]) / config.std[k];
      }
    }
  }
}

PadCropChoice draw_pad_crop(SampleRng& rng, const AugmentConfig& c) {
  PadCropChoice choice;
  choice.dy = static_cast<int>(rng.below(static_cast<uint64_t>(2 * c.pad + 1)));
  choice.dx = static_cast<int>(rng.below(static_cast<uint64_t>(2 * c.pad + 1)));
  choice.flip = c.flip && (rng.next_u64() >> 63) != 0;
  return choice;
}

}  // namespace nostrum::data
