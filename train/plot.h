// A loss-curve PNG written without any imaging library: palette image, a small
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

// Reads weft-train's metrics.csv (step,loss,val_loss,...) into the two curves.
void readMetricsCsv(const std::string& path, Curve* train, Curve* val);

}  // namespace weft::train
