// Augmentation maths of the input pipeline, free of any file format: crop boxes (MLPerf ResNet's
// random-resized-crop, resize-short-side + centre crop) and fused crop/resize/flip/normalise
// kernels from uint8 HWC pixels into float HWC. Random choices come from a SampleRng keyed by the
// sample.
#pragma once

#include <cstdint>
#include <vector>

#include "nostrum/data/sample_rng.hpp"

namespace nostrum::data {

// A crop window in source pixel coordinates (may be fractional after a scaled decode).
struct CropBox {
  float y = 0, x = 0, height = 0, width = 0;
};

struct AugmentConfig {
  bool train = true;
  int out_height = 224, out_width = 224, out_channels = 3;
  // train, decoded images: torchvision RandomResizedCrop(scale, ratio) + RandomHorizontalFlip
  float min_scale = 0.08f, max_scale = 1.0f;
  float min_ratio = 3.0f / 4.0f, max_ratio = 4.0f / 3.0f;
  bool flip = true;
  // eval, decoded images: resize the short side to this, then centre-crop out_height x out_width
  int eval_resize = 256;
  // train, raw (fixed-size) images: zero-pad by this many pixels, random crop back to the image
  // size
  int pad = 4;
  // (x / 255 - mean[c]) / std[c]; sizes must equal out_channels. The loader fills empty ones with
  // the dataset manifest's statistics (else ImageNet's); validate() needs them set.
  std::vector<float> mean, std;
};

void validate(const AugmentConfig& config);  // OptionError naming the bad field

// torchvision RandomResizedCrop.get_params: 10 tries of area scale and log-uniform ratio, then the
// centre crop with the ratio clamped to [min_ratio, max_ratio].
CropBox random_resized_crop(SampleRng& rng, int height, int width, const AugmentConfig& config);
// Resize the short side to eval_resize, centre-crop out_h x out_w; expressed in source coordinates.
CropBox centre_crop(int height, int width, const AugmentConfig& config);

// Fused crop + bilinear resize (half-pixel centres, edge clamp, no antialias) + optional horizontal
// flip + normalisation. Source channels src_c are 1 or 3; a grey source fills all out channels.
void resample_normalise(float* out,          // out (out_h, out_w, out_c)
                        const uint8_t* src,  // in (src_h, src_w, src_c)
                        int src_h, int src_w, int src_c, const CropBox& box, bool flip,
                        const AugmentConfig& config);

// Raw images: out = normalise(flip(crop(pad(src)))) with crop offset (dy, dx) in [0, 2*pad].
void pad_crop_normalise(float* out,          // out (h, w, c)
                        const uint8_t* src,  // in (h, w, c)
                        int h, int w, int c, int pad, int dy, int dx, bool flip,
                        const AugmentConfig& config);

// Draws the random choices for one raw training sample (offsets and flip) from its rng.
struct PadCropChoice {
  int dy = 0, dx = 0;
  bool flip = false;
};
PadCropChoice draw_pad_crop(SampleRng& rng, const AugmentConfig& config);

}  // namespace nostrum::data
