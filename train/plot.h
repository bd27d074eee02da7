// Loss-curve and pipeline-schedule PNGs written without any imaging library: palette image, a small
// built-in 5x7 bitmap font, zlib stream of stored deflate blocks.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace weft::train {

using Curve = std::vector<std::pair<double, double>>;  // (step, loss)

// Plots train (blue line) and validation (orange, with markers) loss against step.
// Throws std::runtime_error if the file cannot be written.
void writeLossPlot(const std::string& path, const Curve& train, const Curve& val,
                   int width = 800, int height = 480);

// One action of a pipeline stage in a schedule chart: label "F3", "B3", "I3", "W3"
// (the first letter picks the color), time span in seconds.
struct ScheduleBox {
  std::string label;
  double begin = 0, end = 0;
};
// A measured pipeline step as a stage x time chart, one row per stage, one box
// per action, idle time left white (the pipeline-schedule picture, from real timings).
void writeSchedulePlot(const std::string& path, const std::vector<std::vector<ScheduleBox>>& stages,
                       int width = 1400, int rowHeight = 44);

// Reads weft-train's metrics.csv (step,loss,val_loss,...) into the two curves.
void readMetricsCsv(const std::string& path, Curve* train, Curve* val);

}  // namespace weft::train
