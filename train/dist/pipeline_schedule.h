// Pipeline schedules as data. A builder returns, for each of the P stages, the
// ordered list of actions it runs: forwards and backwards (or the backward split
// into its input gradient I and weight gradient W) of micro-batch m on model
// chunk c, and the sends and receives of activations and their gradients between
// neighbouring virtual stages. Virtual stage of chunk c on stage s: c * P + s.
//
// The same lists are executed by the trainer, checked by run() without any
// process (every F and B once, dependencies in order, sends matched in order by
// receives, no deadlock) and timed by run() with per-action costs, which gives
// the step time and the bubble.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::train::pp {

enum class Op : uint8_t {
  Forward,
  Backward,    // input and weight gradient together
  InputGrad,   // I: the gradient the previous virtual stage waits for
  WeightGrad,  // W: the parameters' gradient, needed only by the optimizer
  SendAct,     // to the next virtual stage
  RecvAct,     // from the previous virtual stage
  SendGrad,    // to the previous virtual stage
  RecvGrad,    // from the next virtual stage
};
const char* op_name(Op op);

struct Action {
  Op op;
  int mb;     // micro-batch
  int chunk;  // model chunk on this stage
};

struct Schedule {
  std::string name;
  int stages = 0;
  int microbatches = 0;
  int chunks = 1;
  std::vector<std::vector<Action>> actions;  // per stage, in order
};

// Every forward, then every backward.
Schedule gpipe(int stages, int microbatches);
// PipeDream-Flush: P - s - 1 warm-up forwards, then one forward one backward, then the rest of the backwards.
Schedule one_f_one_b(int stages, int microbatches);
// Megatron's interleaved 1F1B over `chunks` model chunks per stage; micro-batches a multiple of the stages.
Schedule interleaved(int stages, int microbatches, int chunks);
// ZB-H1: 1F1B's order with each backward split into I and W; the cool-down runs
// the I's first (they are the critical path to stage 0) and each deferred W
// after the next I, where the stage would otherwise wait.
Schedule zero_bubble_h1(int stages, int microbatches);

// Costs of one action on a whole stage's layers; a chunk takes 1/chunks of them.
struct Costs {
  double forward = 1, backward = 2, input_grad = 1, weight_grad = 1;
  double transfer = 0;  // from a send to its receive being possible
};

struct Execution {
  std::string error;  // empty: the schedule is valid
  double step_time = 0;
  std::vector<double> busy;          // per stage
  std::vector<int> peak_activations;  // per stage: micro-batch chunks held between F and the end of their backward
  double bubble() const;              // idle share of the P stages over the step
};

// Executes the schedule symbolically: errors name the stage and the action.
Execution run(const Schedule& s, const Costs& costs = {});

// The bubble of GPipe and 1F1B with uniform stages and free transfers:
// (P - 1) / (v M + P - 1), v = 1; interleaving divides the warm-up and cool-down by v.
double bubble_formula(int stages, int microbatches, int chunks = 1);

}  // namespace weft::train::pp
