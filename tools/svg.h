// A tiny SVG writer for the CLI's pictures (plot, inspect --memory): shapes
// and text appended in order, every text and attribute value escaped, and
// Frame, a plot area with linear axes, ticks and labels.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace tscli {

// &, <, >, " and ' as XML entities; other control characters dropped (XML
// 1.0 cannot carry them).
std::string xml_escape(const std::string& s);

class Svg {
 public:
  Svg(double width, double height);
  // `style`: extra attributes, already escaped (e.g. R"(fill="#ccc")").
  // A non-empty `title` becomes a tooltip child (<title>).
  void rect(double x, double y, double w, double h, const std::string& style,
            const std::string& title = "");
  void line(double x1, double y1, double x2, double y2, const std::string& style);
  void polyline(const std::vector<std::pair<double, double>>& pts, const std::string& style,
                const std::string& title = "");
  void circle(double x, double y, double r, const std::string& style,
              const std::string& title = "");
  void text(double x, double y, const std::string& s, const std::string& style = "");
  // Groups: open_group(R"(class="legend")") ... close_group().
  void open_group(const std::string& attrs);
  void close_group();
  const std::string& str();  // the document, closed

 private:
  std::string body_;
  bool closed_ = false;
};

// "1.5", "2e+06": short numbers for labels and coordinates.
std::string num(double v);

// Round tick values covering [lo, hi], about `n` of them (1, 2 or 5 times a
// power of ten apart).
std::vector<double> nice_ticks(double lo, double hi, int n);

// A plot area: data ranges mapped to a pixel box (y up), drawn with axes,
// tick marks, tick labels and axis titles.
struct Frame {
  double left, top, width, height;  // pixels
  double x0, x1, y0, y1;            // data range
  double px(double x) const { return left + (x - x0) / (x1 - x0) * width; }
  double py(double y) const { return top + height - (y - y0) / (y1 - y0) * height; }
  // Widens the ranges to round ticks (and a zero-width range to a unit one).
  void round_ranges(int xticks, int yticks);
  void draw_axes(Svg& svg, const std::string& xlabel, const std::string& ylabel,
                 int xticks = 8, int yticks = 6) const;
};

// Legend entries (colour, text) in a column at (x, y).
void draw_legend(Svg& svg, double x, double y,
                 const std::vector<std::pair<std::string, std::string>>& entries);

// Writes `content` to `path` (atomically; a ts::Error naming it on failure).
void save(const std::string& path, const std::string& content);

}  // namespace tscli
