// TurboJPEG decode (with DCT scaling, grey and CMYK to RGB) and encode.
#include "io/jpeg.hpp"

#include <turbojpeg.h>

#include <cstring>

#include "nostrum/core/error.hpp"

namespace nostrum::io {

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {
  NOSTRUM_CHECK(handle_, IoError, "cannot initialise libjpeg-turbo", "tjInitDecompress");
}

JpegDecoder::~JpegDecoder() {
  if (handle_) tjDestroy(static_cast<tjhandle>(handle_));
}

void JpegDecoder::reset() {
  // libjpeg-turbo 2.1 can leave a handle in a bad state after a failed call (the next good file
  // then fails with a stale error): start from a fresh handle.
  tjDestroy(static_cast<tjhandle>(handle_));
  handle_ = tjInitDecompress();
  NOSTRUM_CHECK(handle_, IoError, "cannot initialise libjpeg-turbo", "tjInitDecompress");
}

JpegHeader JpegDecoder::header(const uint8_t* bytes, size_t size, const std::string& where) {
  auto* h = static_cast<tjhandle>(handle_);
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (size < 4 || tjDecompressHeader3(h, bytes, static_cast<unsigned long>(size), &width, &height,
                                      &subsamp, &colorspace) != 0) {
    const std::string message = size < 4 ? "too short" : tjGetErrorStr2(h);
    reset();
    throw DataError("not a JPEG image, or its header is damaged: " + message, where);
  }
  NOSTRUM_CHECK(width > 0 && height > 0, DataError, "JPEG with an empty image", where);
  JpegHeader header;
  header.height = height;
  header.width = width;
  header.cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  header.grey = colorspace == TJCS_GRAY;
  return header;
}

void JpegDecoder::decode_rgb(const uint8_t* bytes, size_t size, int denominator,
                             std::vector<uint8_t>& out, int& height, int& width,
                             const std::string& where) {
  auto* h = static_cast<tjhandle>(handle_);
  const JpegHeader info = header(bytes, size, where);
  const tjscalingfactor factor{1, denominator};
  width = TJSCALED(info.width, factor);
  height = TJSCALED(info.height, factor);
  const size_t pixels = static_cast<size_t>(width) * height;
  if (out.size() < pixels * 3) out.resize(pixels * 3);
  uint8_t* target = out.data();
  int format = TJPF_RGB;
  if (info.cmyk) {  // libjpeg cannot convert CMYK to RGB itself
    if (cmyk_.size() < pixels * 4) cmyk_.resize(pixels * 4);
    target = cmyk_.data();
    format = TJPF_CMYK;
  }
  const int status = tjDecompress2(h, bytes, static_cast<unsigned long>(size), target, width, 0,
                                   height, format, 0);
  if (status != 0) {
    const char* message = tjGetErrorStr2(h);
    // libjpeg's warnings mean missing or damaged data (truncation, bad Huffman codes), except
    // "extraneous bytes before marker", which a few ImageNet files carry and which leaves the image
    // whole (PIL and torchvision accept those files silently): that one alone is tolerated.
    const bool warning = tjGetErrorCode(h) == TJERR_WARNING;
    if (!warning || std::strstr(message, "extraneous bytes") == nullptr) {
      const std::string text = message;
      reset();
      throw DataError("corrupt or truncated JPEG: " + text, where);
    }
  }
  if (info.cmyk) {
    // Adobe (Photoshop) CMYK JPEGs store inverted values: R = C' K' / 255 with C' = 255 - C.
    for (size_t p = 0; p < pixels; ++p) {
      const unsigned k = cmyk_[p * 4 + 3];
      for (int c = 0; c < 3; ++c)
        out[p * 3 + c] = static_cast<uint8_t>((cmyk_[p * 4 + c] * k + 127) / 255);
    }
  }
}

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int height, int width, int channels,
                                 int quality) {
  tjhandle h = tjInitCompress();
  NOSTRUM_CHECK(h, IoError, "cannot initialise libjpeg-turbo", "tjInitCompress");
  const int format = channels == 1 ? TJPF_GRAY : channels == 4 ? TJPF_CMYK : TJPF_RGB;
  const int subsamp = channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  const int status =
      tjCompress2(h, pixels, width, 0, height, format, &jpeg, &size, subsamp, quality, 0);
  std::string message = status != 0 ? tjGetErrorStr2(h) : "";
  std::vector<uint8_t> result;
  if (status == 0) result.assign(jpeg, jpeg + size);
  tjFree(jpeg);
  tjDestroy(h);
  NOSTRUM_CHECK(status == 0, IoError, "JPEG encode failed: " + message, "encode_jpeg");
  return result;
}

}  // namespace nostrum::io
