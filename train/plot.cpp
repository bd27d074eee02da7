#include "train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace weft::train {

namespace {

enum Color : uint8_t { kWhite, kBlack, kGrid, kBlue, kOrange, kGreen, kRed };
const uint8_t kPalette[][3] = {{255, 255, 255}, {0, 0, 0},     {225, 225, 225}, {31, 119, 180},
                               {255, 127, 14},  {44, 160, 44}, {214, 39, 40}};

// 5x7 glyphs, one row per byte, bit 4 = leftmost column.
struct Glyph {
  char c;
  uint8_t rows[7];
};
const Glyph kFont[] = {
    {'0', {14, 17, 19, 21, 25, 17, 14}}, {'1', {4, 12, 4, 4, 4, 4, 14}},
    {'2', {14, 17, 1, 2, 4, 8, 31}},     {'3', {31, 2, 4, 2, 1, 17, 14}},
    {'4', {2, 6, 10, 18, 31, 2, 2}},     {'5', {31, 16, 30, 1, 1, 17, 14}},
    {'6', {6, 8, 16, 30, 17, 17, 14}},   {'7', {31, 1, 2, 4, 8, 8, 8}},
    {'8', {14, 17, 17, 14, 17, 17, 14}}, {'9', {14, 17, 17, 15, 1, 2, 12}},
    {'.', {0, 0, 0, 0, 0, 12, 12}},      {'-', {0, 0, 0, 31, 0, 0, 0}},
    {'s', {0, 0, 14, 16, 14, 1, 30}},    {'t', {8, 8, 28, 8, 8, 9, 6}},
    {'e', {0, 0, 14, 17, 31, 16, 14}},   {'p', {0, 0, 30, 17, 30, 16, 16}},
    {'l', {12, 4, 4, 4, 4, 4, 14}},      {'o', {0, 0, 14, 17, 17, 17, 14}},
    {'r', {0, 0, 22, 25, 16, 16, 16}},   {'a', {0, 0, 14, 1, 15, 17, 15}},
    {'i', {4, 0, 12, 4, 4, 4, 14}},      {'n', {0, 0, 22, 25, 17, 17, 17}},
    {'v', {0, 0, 17, 17, 17, 10, 4}},    {'k', {16, 16, 18, 20, 24, 20, 18}},
    {'m', {0, 0, 26, 21, 21, 17, 17}},   {'g', {0, 0, 15, 17, 15, 1, 14}},
    {'c', {0, 0, 14, 16, 16, 17, 14}},   {'F', {31, 16, 16, 30, 16, 16, 16}},
    {'B', {30, 17, 17, 30, 17, 17, 30}}, {'I', {14, 4, 4, 4, 4, 4, 14}},
    {'W', {17, 17, 17, 21, 21, 21, 10}},
};

struct Canvas {
  int w, h;
  std::vector<uint8_t> px;
  Canvas(int w_, int h_) : w(w_), h(h_), px(size_t(w_) * h_, kWhite) {}
  void set(int x, int y, uint8_t c) {
    if (x >= 0 && y >= 0 && x < w && y < h) px[size_t(y) * w + x] = c;
  }
  void rect(int x0, int y0, int x1, int y1, uint8_t c) {
    for (int y = y0; y <= y1; y++)
      for (int x = x0; x <= x1; x++) set(x, y, c);
  }
  void line(int x0, int y0, int x1, int y1, uint8_t c, int thick) {
    int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    while (true) {
      rect(x0 - thick / 2, y0 - thick / 2, x0 + (thick - 1) / 2, y0 + (thick - 1) / 2, c);
      if (x0 == x1 && y0 == y1) break;
      int e2 = 2 * err;
      if (e2 >= dy) { err += dy; x0 += sx; }
      if (e2 <= dx) { err += dx; y0 += sy; }
    }
  }
  // Text at (x, y) top-left, scale s; returns the width drawn.
  int text(int x, int y, const std::string& s, uint8_t c, int scale = 2) {
    int cx = x;
    for (char ch : s) {
      for (const Glyph& g : kFont) {
        if (g.c != ch) continue;
        for (int r = 0; r < 7; r++)
          for (int col = 0; col < 5; col++)
            if (g.rows[r] & (16 >> col)) rect(cx + col * scale, y + r * scale, cx + col * scale + scale - 1, y + r * scale + scale - 1, c);
      }
      cx += 6 * scale;
    }
    return cx - x;
  }
};

uint32_t crc32(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; i--) s.push_back(char((v >> (8 * i)) & 0xff));
}

void chunk(std::string& out, const char* type, const std::string& data) {
  put32(out, uint32_t(data.size()));
  std::string td = std::string(type, 4) + data;
  out += td;
  put32(out, crc32(reinterpret_cast<const uint8_t*>(td.data()), td.size()));
}

std::string fmtNum(double v) {
  char b[32];
  if (std::fabs(v) >= 10000) std::snprintf(b, sizeof b, "%.0fk", v / 1000);
  else if (std::fabs(v) >= 100 || v == std::floor(v)) std::snprintf(b, sizeof b, "%.0f", v);
  else std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// PNG: 8-bit palette image; zlib stream of stored (uncompressed) deflate blocks.
void writePng(const std::string& path, const Canvas& cv) {
  const int W = cv.w, H = cv.h;
  std::string raw;
  raw.reserve(size_t(H) * (W + 1));
  for (int y = 0; y < H; y++) {
    raw.push_back(0);  // filter: none
    raw.append(reinterpret_cast<const char*>(&cv.px[size_t(y) * W]), size_t(W));
  }
  std::string z = "\x78\x01";
  for (size_t off = 0; off < raw.size() || off == 0; off += 65535) {
    const size_t n = std::min<size_t>(65535, raw.size() - off);
    z.push_back(off + n >= raw.size() ? 1 : 0);  // BFINAL, BTYPE=00
    z.push_back(char(n & 0xff));
    z.push_back(char(n >> 8));
    z.push_back(char(~n & 0xff));
    z.push_back(char((~n >> 8) & 0xff));
    z.append(raw, off, n);
    if (off + n >= raw.size()) break;
  }
  uint32_t a = 1, b = 0;
  for (unsigned char c : raw) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put32(z, (b << 16) | a);

  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put32(ihdr, uint32_t(W));
  put32(ihdr, uint32_t(H));
  ihdr += std::string("\x08\x03\x00\x00\x00", 5);  // depth 8, palette, deflate, filter 0, no interlace
  chunk(png, "IHDR", ihdr);
  std::string plte;
  for (const auto& c : kPalette) plte.append(reinterpret_cast<const char*>(c), 3);
  chunk(png, "PLTE", plte);
  chunk(png, "IDAT", z);
  chunk(png, "IEND", "");
  std::ofstream o(path, std::ios::binary | std::ios::trunc);
  o.write(png.data(), std::streamsize(png.size()));
  if (!o) throw std::runtime_error("cannot write " + path);
}

}  // namespace

void writeLossPlot(const std::string& path, const Curve& train, const Curve& val, int W, int H) {
  Canvas cv(W, H);
  const int left = 70, right = 20, top = 20, bottom = 50;
  const int pw = W - left - right, ph = H - top - bottom;
  double xmax = 1, ymin = INFINITY, ymax = -INFINITY;
  for (const Curve* c : {&train, &val})
    for (auto [x, y] : *c) {
      if (!std::isfinite(y)) continue;
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  if (!std::isfinite(ymin)) { ymin = 0; ymax = 1; }
  if (ymax - ymin < 1e-6) ymax = ymin + 1;
  const double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;
  auto X = [&](double x) { return left + int(std::lround(x / xmax * pw)); };
  auto Y = [&](double y) { return top + int(std::lround((ymax - y) / (ymax - ymin) * ph)); };

  for (int i = 0; i <= 5; i++) {  // grid and tick labels
    const double yv = ymin + (ymax - ymin) * i / 5, xv = xmax * i / 5;
    cv.line(left, Y(yv), left + pw, Y(yv), kGrid, 1);
    cv.line(X(xv), top, X(xv), top + ph, kGrid, 1);
    std::string ys = fmtNum(yv), xs = fmtNum(std::round(xv));
    cv.text(left - 8 - int(ys.size()) * 12, Y(yv) - 7, ys, kBlack);
    cv.text(X(xv) - int(xs.size()) * 6, top + ph + 8, xs, kBlack);
  }
  cv.line(left, top, left, top + ph, kBlack, 1);
  cv.line(left, top + ph, left + pw, top + ph, kBlack, 1);
  cv.text(left + pw / 2 - 24, H - 18, "step", kBlack);
  cv.text(left + 8, top + 6, "loss", kBlack);

  auto draw = [&](const Curve& c, uint8_t color, int thick, bool markers) {
    bool first = true;
    int px = 0, py = 0;
    for (auto [x, y] : c) {
      if (!std::isfinite(y)) continue;
      const int qx = X(x), qy = Y(y);
      if (!first) cv.line(px, py, qx, qy, color, thick);
      if (markers) cv.rect(qx - 3, qy - 3, qx + 3, qy + 3, color);
      px = qx;
      py = qy;
      first = false;
    }
  };
  draw(train, kBlue, 1, false);
  draw(val, kOrange, 2, true);
  const int lx = left + pw - 130, ly = top + 10;  // legend
  cv.rect(lx, ly + 5, lx + 20, ly + 7, kBlue);
  cv.text(lx + 28, ly, "train", kBlack);
  cv.rect(lx, ly + 25, lx + 20, ly + 27, kOrange);
  cv.text(lx + 28, ly + 20, "val", kBlack);

  writePng(path, cv);
}

void writeSchedulePlot(const std::string& path, const std::vector<std::vector<ScheduleBox>>& stages, int W,
                       int rowHeight) {
  const int left = 110, right = 20, top = 20, bottom = 50, P = int(stages.size());
  const int H = top + bottom + rowHeight * std::max(1, P), pw = W - left - right;
  double t0 = INFINITY, t1 = -INFINITY;
  for (const auto& row : stages)
    for (const ScheduleBox& b : row) t0 = std::min(t0, b.begin), t1 = std::max(t1, b.end);
  if (!(t1 > t0)) t0 = 0, t1 = 1;
  Canvas cv(W, H);
  auto X = [&](double t) { return left + int(std::lround((t - t0) / (t1 - t0) * pw)); };
  for (int i = 0; i <= 5; i++) {  // time grid in milliseconds
    const double t = t0 + (t1 - t0) * i / 5;
    cv.line(X(t), top, X(t), top + rowHeight * P, kGrid, 1);
    const std::string ms = fmtNum((t - t0) * 1e3);
    cv.text(X(t) - int(ms.size()) * 6, top + rowHeight * P + 8, ms, kBlack);
  }
  cv.text(left + pw / 2 - 12, H - 18, "ms", kBlack);
  for (int s = 0; s < P; s++) {
    const int y0 = top + s * rowHeight + 3, y1 = top + (s + 1) * rowHeight - 3;
    cv.text(8, (y0 + y1) / 2 - 7, "stage " + std::to_string(s), kBlack);
    for (const ScheduleBox& b : stages[size_t(s)]) {
      const uint8_t color = b.label[0] == 'F' ? kBlue : b.label[0] == 'W' ? kGreen : b.label[0] == 'I' ? kRed : kOrange;
      const int x0 = X(b.begin), x1 = std::max(x0 + 1, X(b.end) - 1);
      cv.rect(x0, y0, x1, y1, color);
      // The label where it fits: scale 2, else 1, else none.
      for (int scale : {2, 1}) {
        const int tw = int(b.label.size()) * 6 * scale;
        if (tw + 2 <= x1 - x0) {
          cv.text((x0 + x1 - tw) / 2 + scale, (y0 + y1) / 2 - 7 * scale / 2, b.label, kWhite, scale);
          break;
        }
      }
    }
  }
  cv.line(left, top, left, top + rowHeight * P, kBlack, 1);
  writePng(path, cv);
}

void readMetricsCsv(const std::string& path, Curve* train, Curve* val) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) f.push_back(cell);
    if (f.size() < 3 || f[0].empty()) continue;
    const double step = std::stod(f[0]);
    if (!f[1].empty()) train->emplace_back(step, std::stod(f[1]));
    if (!f[2].empty()) val->emplace_back(step, std::stod(f[2]));
  }
}

}  // namespace weft::train
