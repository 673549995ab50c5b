// JPEG decode and encode with libjpeg-turbo's TurboJPEG API. A decoder per thread (a tjhandle is
// not shareable); decoded pixels are RGB (H, W, 3) uint8, greyscale and CMYK converted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nostrum::io {

struct JpegHeader {
  int height = 0, width = 0;
  bool cmyk = false;
  bool grey = false;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // Reads the header; DataError naming `where` when the bytes are not a JPEG.
  JpegHeader header(const uint8_t* bytes, size_t size, const std::string& where);
  // Decodes at 1/denominator scale (1, 2, 4 or 8: libjpeg's DCT scaling, far cheaper than decoding
  // at full size and shrinking) into out, resized as needed; sets height and width to the decoded
  // size (ceil(dim / denominator)). DataError naming `where` on a corrupt or truncated JPEG.
  void decode_rgb(const uint8_t* bytes, size_t size, int denominator,
                  std::vector<uint8_t>& out,  // out (height, width, 3)
                  int& height, int& width, const std::string& where);

 private:
  void reset();  // replaces the handle after a failure
  void* handle_ = nullptr;
  std::vector<uint8_t> cmyk_;  // scratch for CMYK JPEGs
};

// Encodes pixels (height, width, channels) with channels 1 (grey), 3 (RGB) or 4 (CMYK) at quality.
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels,  // in (height, width, channels)
                                 int height, int width, int channels, int quality);

}  // namespace nostrum::io
