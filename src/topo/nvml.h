// Which GPUs are joined by NVLink, asked of NVML (libnvidia-ml.so.1, opened at
// run time: weft neither links nor requires it). The CUDA driver tells peer
// access only; NVML tells NVLink from PCIe, as nvidia-smi topo -m does.
#pragma once

#include <string>
#include <vector>

namespace weft::topo {

// Of `others` (PCI addresses, "0000:17:00.0"), those whose link with `gpu` NVML
// reports as NVLink peer to peer. Empty where NVML is missing or does not know
// a GPU; `why` (if given) then says why. `library`: the NVML to open (tests
// name a stand-in).
std::vector<std::string> nvlink_peers(const std::string& gpu, const std::vector<std::string>& others,
                                      std::string* why = nullptr, const char* library = "libnvidia-ml.so.1");

}  // namespace weft::topo
