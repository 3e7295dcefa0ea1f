// `trainstep plot DIR [--out curves.svg]`: the loss and accuracy curves of a
// `train --log-dir DIR` run, from DIR/metrics.jsonl, as one SVG.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "svg.h"
#include "trainstep/metrics.h"

namespace tscli {

namespace {

using Points = std::vector<std::pair<double, double>>;

struct Series {
  std::string name, colour;
  Points pts;     // data coordinates, NaN values left out
  bool markers;   // one dot a point (per-epoch values: few, and one may be alone)
};

void add_point(Series& s, double x, double y) {
  if (std::isfinite(y)) s.pts.push_back({x, y});
}

// The data range of the series' points into fr (x0..x1, y0..y1); false if none.
bool fit(Frame& fr, const std::vector<Series>& series) {
  bool any = false;
  for (const auto& s : series)
    for (const auto& [x, y] : s.pts) {
      if (!any) {
        fr.x0 = fr.x1 = x;
        fr.y0 = fr.y1 = y;
        any = true;
      }
      fr.x0 = std::min(fr.x0, x), fr.x1 = std::max(fr.x1, x);
      fr.y0 = std::min(fr.y0, y), fr.y1 = std::max(fr.y1, y);
    }
  return any;
}

// One panel: axes, lines and a legend. Its x range is the whole run's (all
// panels share it), its y range its own series'.
// The legend goes in the corner the curves head away from: top right for
// falling losses, bottom right for a rising accuracy.
void draw_panel(Svg& svg, Frame fr, const Frame& xs, const std::vector<Series>& series,
                const std::string& ylabel, bool legend_low = false) {
  if (!fit(fr, series)) fr.y0 = 0, fr.y1 = 1;
  fr.x0 = xs.x0, fr.x1 = xs.x1;
  fr.round_ranges(8, 5);
  fr.draw_axes(svg, "global step", ylabel, 8, 5);
  std::vector<std::pair<std::string, std::string>> legend;
  for (const auto& s : series) {
    Points px;
    for (const auto& [x, y] : s.pts) px.push_back({fr.px(x), fr.py(y)});
    const std::string stroke = "stroke=\"" + s.colour + "\" stroke-width=\"2\"";
    svg.open_group("class=\"series\" data-series=\"" + xml_escape(s.name) + "\"");
    svg.polyline(px, stroke, s.name);
    if (s.markers)
      for (size_t i = 0; i < px.size(); ++i)
        svg.circle(px[i].first, px[i].second, 3.5, "fill=\"" + s.colour + "\"",
                   s.name + " at step " + num(s.pts[i].first) + ": " + num(s.pts[i].second));
    svg.close_group();
    legend.push_back({s.colour, s.name + (s.pts.empty() ? " (no values)" : "")});
  }
  const double lx = fr.left + fr.width - 270;
  draw_legend(svg, lx, legend_low ? fr.top + fr.height - 20.0 * legend.size() : fr.top + 20, legend);
}

}  // namespace

void add_plot(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "plot", "Draw a train --log-dir run's loss and accuracy curves as SVG");
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "the run's --log-dir folder (reads DIR/metrics.jsonl)")
      ->required()
      ->type_name("DIR");
  cmd->add_option("--out,-o", *out, "SVG to write (default DIR/curves.svg)")->type_name("FILE");
  add_examples(cmd, {"trainstep train mnist.tstep --data fashion-mnist --log-dir runs/mnist",
                     "trainstep plot runs/mnist --out curves.svg"});
  cmd->callback([=, &action] {
    action = [=] {
      const std::string path = (std::filesystem::path(*dir) / "metrics.jsonl").string();
      const std::string to = out->empty() ? (std::filesystem::path(*dir) / "curves.svg").string() : *out;
      const ts::Metrics m = ts::read_metrics(path);
      Series batch{"train loss (epoch mean so far)", "#1f77b4", {}, false};
      Series train{"train loss (epoch)", "#ff7f0e", {}, true};
      Series test{"test loss (epoch)", "#2ca02c", {}, true};
      Series acc{"test accuracy (epoch)", "#d62728", {}, true};
      for (const auto& b : m.batches) add_point(batch, b.step, b.loss);
      bool has_acc = false;
      for (const auto& e : m.epochs) {
        add_point(train, e.step, e.train_loss);
        add_point(test, e.step, e.test_loss);
        if (e.has_accuracy) add_point(acc, e.step, 100 * e.test_accuracy);
        has_acc = has_acc || e.has_accuracy;
      }
      const double w = 1000, h = has_acc ? 760 : 480;
      Svg svg(w, h);
      svg.text(w / 2, 28, "trainstep run " + *dir,
               R"(text-anchor="middle" font-size="16" class="title")");
      Frame xs{0, 0, 1, 1, 0, 1, 0, 1};
      fit(xs, {batch, train, test, acc});
      draw_panel(svg, Frame{90, 50, w - 130, 340, 0, 1, 0, 1}, xs, {batch, train, test}, "loss");
      if (has_acc)
        draw_panel(svg, Frame{90, 470, w - 130, 220, 0, 1, 0, 1}, xs, {acc}, "test accuracy (%)", true);
      save(to, svg.str());
      std::printf("curves: %s (%zu batch and %zu epoch lines of %s)\n", to.c_str(),
                  m.batches.size(), m.epochs.size(), path.c_str());
      return 0;
    };
  });
}

}  // namespace tscli
