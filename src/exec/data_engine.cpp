#include "exec/data_engine.h"

#include <cstring>

namespace weft::exec {
namespace {

class CpuDataEngine final : public DataEngine {
 public:
  CpuDataEngine() : DataEngine(true) {}
  const char* name() const override { return "cpu"; }
  void copy(void* dst, const void* src, size_t bytes) override { std::memmove(dst, src, bytes); }
  void reduce2(void* dst, const void* a, const void* b, size_t count, weftDataType_t dtype, reduce::Op op) override {
    reduce::reduce2(dst, a, b, count, dtype, op);
  }
  void divide(void* dst, const void* src, size_t count, weftDataType_t dtype, int n) override {
    reduce::divide(dst, src, count, dtype, n);
  }
  void scale(void* dst, const void* src, size_t count, weftDataType_t dtype, const void* scalar) override {
    reduce::scale(dst, src, count, dtype, scalar);
  }
};

}  // namespace

DataEngine& cpu_data_engine() {
  static CpuDataEngine engine;
  return engine;
}

DataEngine* data_engine_for(const BufferKind& kind) { return kind.device ? nullptr : &cpu_data_engine(); }

}  // namespace weft::exec
