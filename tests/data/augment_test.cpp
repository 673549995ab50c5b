// Augmentation maths: crop boxes inside the image with torchvision's scale/ratio ranges, the same
// choices for the same (seed, epoch, sample), and the resample/pad-crop kernels against direct
// formulas.
#include <catch2/catch.hpp>

#include <cmath>

#include "nostrum/core/error.hpp"
#include "nostrum/data/augment.hpp"

using namespace nostrum;
using namespace nostrum::data;

TEST_CASE("augment: random-resized-crop stays inside and honours scale and ratio", "[augment]") {
  AugmentConfig c;
  int fallbacks = 0;
  for (int sample = 0; sample < 2000; ++sample) {
    const int h = 100 + sample % 400, w = 80 + (sample * 7) % 500;
    SampleRng rng(1, 0, static_cast<uint64_t>(sample));
    const CropBox box = random_resized_crop(rng, h, w, c);
    REQUIRE(box.y >= 0);
    REQUIRE(box.x >= 0);
    REQUIRE(box.height >= 1);
    REQUIRE(box.width >= 1);
    REQUIRE(box.y + box.height <= h);
    REQUIRE(box.x + box.width <= w);
    const float area = box.height * box.width / (float(h) * w);
    const float ratio = box.width / box.height;
    if (box.height == h || box.width == w) ++fallbacks;
    REQUIRE(area <= 1.0f + 1e-6f);
    // rounding of sides to integers moves scale and ratio a little for small crops
    REQUIRE(area >= 0.08f * 0.8f);
    REQUIRE(ratio >= 0.75f * 0.8f);
    REQUIRE(ratio <= 4.0f / 3.0f * 1.25f);
  }
  REQUIRE(fallbacks < 400);  // the fallback is rare, as in torchvision
}

TEST_CASE("augment: choices depend only on (seed, epoch, sample)", "[augment]") {
  AugmentConfig c;
  SampleRng a(3, 5, 17), b(3, 5, 17), other_epoch(3, 6, 17), other_sample(3, 5, 18);
  const CropBox x = random_resized_crop(a, 375, 500, c), y = random_resized_crop(b, 375, 500, c);
  REQUIRE(x.y == y.y);
  REQUIRE(x.x == y.x);
  REQUIRE(x.height == y.height);
  REQUIRE(x.width == y.width);
  const CropBox e = random_resized_crop(other_epoch, 375, 500, c);
  const CropBox s = random_resized_crop(other_sample, 375, 500, c);
  REQUIRE((e.x != x.x || e.y != x.y || e.width != x.width));
  REQUIRE((s.x != x.x || s.y != x.y || s.width != x.width));
}

TEST_CASE("augment: centre crop is the middle out x out of the short side resized to 256",
          "[augment]") {
  AugmentConfig c;
  const CropBox box = centre_crop(512, 1024, c);  // scale 0.5: 224 -> 448 source pixels
  REQUIRE(box.height == Approx(448));
  REQUIRE(box.width == Approx(448));
  REQUIRE(box.y == Approx(32));
  REQUIRE(box.x == Approx(288));
}

TEST_CASE("augment: resample of the whole image at its own size is the normalised image",
          "[augment]") {
  AugmentConfig c;
  c.mean = {0.485f, 0.456f, 0.406f};
  c.std = {0.229f, 0.224f, 0.225f};
  c.out_height = 6;
  c.out_width = 5;
  std::vector<uint8_t> src(6 * 5 * 3);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 % 256);
  std::vector<float> out(src.size()), flipped(src.size());
  resample_normalise(out.data(), src.data(), 6, 5, 3, CropBox{0, 0, 6, 5}, false, c);
  resample_normalise(flipped.data(), src.data(), 6, 5, 3, CropBox{0, 0, 6, 5}, true, c);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 5; ++x)
      for (int k = 0; k < 3; ++k) {
        const float expected = (src[(y * 5 + x) * 3 + k] / 255.0f - c.mean[k]) / c.std[k];
        REQUIRE(out[(y * 5 + x) * 3 + k] == Approx(expected).margin(1e-5));
        REQUIRE(flipped[(y * 5 + (4 - x)) * 3 + k] == Approx(expected).margin(1e-5));
      }
}

TEST_CASE("augment: downscale by 2 averages pixel pairs and grey fills all channels", "[augment]") {
  AugmentConfig c;
  c.out_height = 1;
  c.out_width = 2;
  c.mean = {0, 0, 0};
  c.std = {1, 1, 1};
  const uint8_t grey[2 * 4] = {0, 100, 200, 255, 0, 100, 200, 255};  // (2, 4, 1)
  float out[2 * 3];
  resample_normalise(out, grey, 2, 4, 1, CropBox{0, 0, 2, 4}, false, c);
  REQUIRE(out[0] == Approx(50 / 255.0f));
  REQUIRE(out[1] == Approx(50 / 255.0f));
  REQUIRE(out[3] == Approx(227.5f / 255.0f));
}

TEST_CASE("augment: pad-crop shifts with zero padding and flips", "[augment]") {
  AugmentConfig c;
  c.out_channels = 1;
  c.mean = {0};
  c.std = {1};
  std::vector<uint8_t> src(4 * 4);
  for (int i = 0; i < 16; ++i) src[i] = static_cast<uint8_t>(i + 1);
  std::vector<float> out(16);
  pad_crop_normalise(out.data(), src.data(), 4, 4, 1, 2, 0, 3, false,
                     c);  // dy=0 (up 2), dx=3 (right 1)
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      const int sy = y - 2, sx = x + 1;
      const float expected = (sy >= 0 && sx < 4) ? src[sy * 4 + sx] / 255.0f : 0.0f;
      REQUIRE(out[y * 4 + x] == Approx(expected));
    }
  pad_crop_normalise(out.data(), src.data(), 4, 4, 1, 2, 2, 2, true, c);  // centred: a pure flip
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) REQUIRE(out[y * 4 + x] == Approx(src[y * 4 + 3 - x] / 255.0f));
  c.pad = 4;
  for (uint64_t s = 0; s < 100; ++s) {
    SampleRng rng(0, 0, s);
    const PadCropChoice choice = draw_pad_crop(rng, c);
    REQUIRE(choice.dy >= 0);
    REQUIRE(choice.dy <= 8);
    REQUIRE(choice.dx >= 0);
    REQUIRE(choice.dx <= 8);
  }
}

TEST_CASE("augment: invalid settings are option errors naming the field", "[augment]") {
  AugmentConfig imagenet;
  imagenet.mean = {0.485f, 0.456f, 0.406f};
  imagenet.std = {0.229f, 0.224f, 0.225f};
  AugmentConfig c = imagenet;
  validate(c);
  c.mean = {0.5f};
  REQUIRE_THROWS_AS(validate(c), OptionError);
  c = AugmentConfig{};
  REQUIRE_THROWS_WITH(validate(c), Catch::Contains("mean/std"));
  c = imagenet;
  c.min_scale = 0;
  REQUIRE_THROWS_WITH(validate(c), Catch::Contains("scale"));
  c = imagenet;
  c.eval_resize = 100;
  REQUIRE_THROWS_WITH(validate(c), Catch::Contains("eval_resize"));
}
