// Pages as a browser shows them: headless Chromium's screenshot of a page, and a PNG decoder
// just enough to read it back, for tests that check what a page really draws
// (memory_html_render_test.cpp, report_html_test.cpp).
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace opscope::testing {

// --- a PNG decoder, just enough for a browser's screenshot ----------------------------------
// 8-bit RGB or RGBA, not interlaced; every chunk's CRC is checked.

struct Image {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<std::uint8_t> rgb;  // 3 bytes per pixel, row after row

  std::array<std::uint8_t, 3> at(std::uint32_t x, std::uint32_t y) const {
    const std::size_t i = (static_cast<std::size_t>(y) * width + x) * 3;
    return {rgb[i], rgb[i + 1], rgb[i + 2]};
  }
};

inline std::uint32_t be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

inline int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Returns the image, or nullopt with `error` set.
inline std::optional<Image> decode_png(const std::string& file, std::string* error) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(file.data());
  const std::size_t size = file.size();
  static constexpr std::uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size < 8 || std::memcmp(data, kSignature, 8) != 0) {
    *error = "not a PNG file";
    return std::nullopt;
  }
  Image image;
  int channels = 0;
  std::string idat;
  bool ended = false;
  for (std::size_t pos = 8; !ended;) {
    if (pos + 12 > size) {
      *error = "truncated chunk at byte " + std::to_string(pos);
      return std::nullopt;
    }
    const std::uint32_t length = be32(data + pos);
    if (length > size - pos - 12) {
      *error = "chunk longer than the file at byte " + std::to_string(pos);
      return std::nullopt;
    }
    const std::string type(reinterpret_cast<const char*>(data + pos + 4), 4);
    const std::uint8_t* body = data + pos + 8;
    const std::uint32_t crc = be32(body + length);
    if (crc32(crc32(0, data + pos + 4, 4), body, length) != crc) {
      *error = "bad CRC in chunk " + type;
      return std::nullopt;
    }
    if (type == "IHDR") {
      if (length != 13) {
        *error = "IHDR of length " + std::to_string(length);
        return std::nullopt;
      }
      image.width = be32(body);
      image.height = be32(body + 4);
      const int depth = body[8], color = body[9], interlace = body[12];
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        *error = "unsupported PNG: depth " + std::to_string(depth) + ", colour type " +
                 std::to_string(color) + ", interlace " + std::to_string(interlace);
        return std::nullopt;
      }
      channels = color == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.append(reinterpret_cast<const char*>(body), length);
    } else if (type == "IEND") {
      ended = true;
    }
    pos += 12 + length;
  }
  if (channels == 0 || image.width == 0 || image.height == 0) {
    *error = "no IHDR";
    return std::nullopt;
  }

  // Inflate: one filter byte, then the row's bytes, per row.
  const std::size_t stride = static_cast<std::size_t>(image.width) * channels;
  std::vector<std::uint8_t> raw((stride + 1) * image.height);
  z_stream zs{};
  inflateInit(&zs);
  zs.next_in = reinterpret_cast<Bytef*>(idat.data());
  zs.avail_in = static_cast<uInt>(idat.size());
  zs.next_out = raw.data();
  zs.avail_out = static_cast<uInt>(raw.size());
  const int rc = inflate(&zs, Z_FINISH);
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || zs.avail_out != 0) {
    *error = "image data does not inflate to " + std::to_string(raw.size()) + " bytes";
    return std::nullopt;
  }

  // Undo the filters (PNG spec section 9): each byte is predicted from the byte one pixel to
  // the left (a), the one above (b) and the one above-left (c).
  std::vector<std::uint8_t> pixels(stride * image.height);
  for (std::uint32_t y = 0; y < image.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &pixels[y * stride];
    const std::uint8_t* above = y > 0 ? &pixels[(y - 1) * stride] : nullptr;
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<std::size_t>(channels) ? out[i - channels] : 0;
      const int b = above != nullptr ? above[i] : 0;
      const int c =
          above != nullptr && i >= static_cast<std::size_t>(channels) ? above[i - channels] : 0;
      int predicted = 0;
      switch (filter) {
        case 0:
          predicted = 0;
          break;
        case 1:
          predicted = a;
          break;
        case 2:
          predicted = b;
          break;
        case 3:
          predicted = (a + b) / 2;
          break;
        case 4:
          predicted = paeth(a, b, c);
          break;
        default:
          *error = "unknown filter type " + std::to_string(filter) + " in row " + std::to_string(y);
          return std::nullopt;
      }
      out[i] = static_cast<std::uint8_t>(in[i] + predicted);
    }
  }
  image.rgb.resize(static_cast<std::size_t>(image.width) * image.height * 3);
  for (std::size_t p = 0; p < static_cast<std::size_t>(image.width) * image.height; ++p) {
    for (int k = 0; k < 3; ++k) image.rgb[p * 3 + k] = pixels[p * channels + k];
  }
  return image;
}

// Pixels within `tolerance` of `color` in every channel, in the columns left of `x_end`.
inline std::size_t count_color(const Image& image, std::array<std::uint8_t, 3> color,
                               int tolerance = 3, std::uint32_t x_end = UINT32_MAX) {
  std::size_t n = 0;
  for (std::uint32_t y = 0; y < image.height; ++y) {
    for (std::uint32_t x = 0; x < std::min(x_end, image.width); ++x) {
      const std::array<std::uint8_t, 3> p = image.at(x, y);
      bool near = true;
      for (int k = 0; k < 3; ++k) near = near && std::abs(p[k] - color[k]) <= tolerance;
      n += near ? 1 : 0;
    }
  }
  return n;
}

// The Chromium binary, or empty when there is none.
inline std::string find_chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                           "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return {};
}

// Screenshots `page` (a file) with headless Chromium in a window of `width` x `height` into
// `png`, with a profile and HOME of its own under `scratch` (Chromium writes both and must not
// touch the user's). Returns Chromium's output when no screenshot was made, else empty.
inline std::string screenshot(const std::string& chromium, const std::string& page,
                              const std::string& png, const std::string& scratch, int width,
                              int height) {
  const std::string log = scratch + "/chromium.log";
  const std::string command =
      "HOME=" + scratch + "/home timeout 120 " + chromium +
      " --headless=new --no-sandbox --disable-gpu --hide-scrollbars --no-first-run"
      " --user-data-dir=" +
      scratch + "/profile --window-size=" + std::to_string(width) + "," + std::to_string(height) +
      " --screenshot=" + png + " file://" + page + " >" + log + " 2>&1";
  const int status = std::system(command.c_str());
  if (::access(png.c_str(), R_OK) == 0) return {};
  std::string out = "Chromium made no screenshot (status " + std::to_string(status) + ")";
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buf[4096];
    const std::size_t n = std::fread(buf, 1, sizeof buf, f);
    std::fclose(f);
    out += ":\n" + std::string(buf, n);
  }
  return out;
}

}  // namespace opscope::testing
