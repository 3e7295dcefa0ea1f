#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "trainstep/file.h"

namespace tscli {

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string num(double v) {
  if (std::fabs(v) < 1e-12) v = 0;  // no "-0" or "1e-17" at a tick meant to be zero
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

namespace {

std::string title_el(const std::string& title) {
  return title.empty() ? "" : "<title>" + xml_escape(title) + "</title>";
}

// A shape with an optional tooltip: <rect .../> or <rect ...><title>..</title></rect>.
std::string element(const std::string& tag, const std::string& attrs, const std::string& title) {
  if (title.empty()) return "<" + tag + " " + attrs + "/>\n";
  return "<" + tag + " " + attrs + ">" + title_el(title) + "</" + tag + ">\n";
}

}  // namespace

Svg::Svg(double width, double height) {
  body_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" +
          num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
          "\" font-family=\"sans-serif\" font-size=\"13\">\n"
          "<rect x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" + num(height) +
          "\" fill=\"white\"/>\n";
}

void Svg::rect(double x, double y, double w, double h, const std::string& style,
               const std::string& title) {
  body_ += element("rect", "x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) +
                               "\" height=\"" + num(h) + "\" " + style,
                   title);
}

void Svg::line(double x1, double y1, double x2, double y2, const std::string& style) {
  body_ += element("line", "x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) +
                               "\" y2=\"" + num(y2) + "\" " + style,
                   "");
}

void Svg::polyline(const std::vector<std::pair<double, double>>& pts, const std::string& style,
                   const std::string& title) {
  std::string p;
  for (const auto& [x, y] : pts) p += (p.empty() ? "" : " ") + num(x) + "," + num(y);
  body_ += element("polyline", "points=\"" + p + "\" fill=\"none\" " + style, title);
}

void Svg::circle(double x, double y, double r, const std::string& style,
                 const std::string& title) {
  body_ += element("circle",
                   "cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"" + num(r) + "\" " + style,
                   title);
}

void Svg::text(double x, double y, const std::string& s, const std::string& style) {
  body_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" " + style + ">" + xml_escape(s) +
           "</text>\n";
}

void Svg::open_group(const std::string& attrs) { body_ += "<g " + attrs + ">\n"; }
void Svg::close_group() { body_ += "</g>\n"; }

const std::string& Svg::str() {
  if (!closed_) body_ += "</svg>\n";
  closed_ = true;
  return body_;
}

void save(const std::string& path, const std::string& content) {
  ts::write_file_atomic(path, content.data(), content.size());
}

std::vector<double> nice_ticks(double lo, double hi, int n) {
  if (!(hi > lo) || n < 1) return {lo};
  const double raw = (hi - lo) / n;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = p;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(v);
  return t;
}

void Frame::round_ranges(int xticks, int yticks) {
  auto widen = [](double& a, double& b, int n) {
    if (!(b > a)) {  // one point (or none): a unit range around it
      a -= 0.5;
      b += 0.5;
    }
    const auto t = nice_ticks(a, b, n);
    if (t.size() < 2) return;
    const double step = t[1] - t[0];
    a = std::floor(a / step + 1e-9) * step;
    b = std::ceil(b / step - 1e-9) * step;
  };
  widen(x0, x1, xticks);
  widen(y0, y1, yticks);
}

void Frame::draw_axes(Svg& svg, const std::string& xlabel, const std::string& ylabel, int xticks,
                      int yticks) const {
  const std::string axis = R"(stroke="#333" stroke-width="1")";
  const std::string grid = R"(stroke="#ddd" stroke-width="1")";
  svg.open_group(R"(class="axes")");
  for (double v : nice_ticks(x0, x1, xticks)) {
    const double x = px(v);
    svg.line(x, top, x, top + height, grid);
    svg.line(x, top + height, x, top + height + 5, axis);
    svg.text(x, top + height + 19, num(v), R"(text-anchor="middle" class="tick")");
  }
  for (double v : nice_ticks(y0, y1, yticks)) {
    const double y = py(v);
    svg.line(left, y, left + width, y, grid);
    svg.line(left - 5, y, left, y, axis);
    svg.text(left - 8, y + 4, num(v), R"(text-anchor="end" class="tick")");
  }
  svg.line(left, top + height, left + width, top + height, axis);
  svg.line(left, top, left, top + height, axis);
  svg.text(left + width / 2, top + height + 40, xlabel, R"(text-anchor="middle" class="axis-label")");
  const std::string yx = num(left - 55), yy = num(top + height / 2);
  svg.text(left - 55, top + height / 2, ylabel,
           "text-anchor=\"middle\" class=\"axis-label\" transform=\"rotate(-90 " + yx + " " + yy +
               ")\"");
  svg.close_group();
}

void draw_legend(Svg& svg, double x, double y,
                 const std::vector<std::pair<std::string, std::string>>& entries) {
  svg.open_group(R"(class="legend")");
  double w = 0;
  for (const auto& e : entries) w = std::max(w, 7.0 * e.second.size());  // ~13px sans-serif
  svg.rect(x - 8, y - 14, w + 46, 20.0 * entries.size() + 10,
           R"(fill="white" fill-opacity="0.9" stroke="#999")");
  for (size_t i = 0; i < entries.size(); ++i) {
    const double yi = y + 20.0 * i;
    svg.rect(x, yi - 6, 22, 6, "fill=\"" + xml_escape(entries[i].first) + "\"");
    svg.text(x + 30, yi, entries[i].second);
  }
  svg.close_group();
}

}  // namespace tscli
