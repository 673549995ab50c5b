// evaluate: averaged BN statistics, every validation sample scored once, counts summed.
#include "evaluate.hpp"

#include <string>

#include "mpi/weight_sync.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::train {

namespace {
void average_bn_statistics(Run& run) {
  mpi::StallWatchdog::Wait wait(run.watchdog.get());  // every rank must arrive
  mpi::average_over_ranks(run.world, run.model->buffer_data(), run.model->buffer_count());
}
}  // namespace

double evaluate(Run& run, std::vector<int64_t>* scored) {
  average_bn_statistics(run);
  model::Model& net = *run.model;
  io::Loader& loader = *run.eval_loader;
  loader.start_epoch(0);
  int64_t counts[2] = {0, 0};  // correct, scored
  io::Batch batch;
  while (loader.next(batch)) {
    if (batch.count == 0) continue;  // TailPolicy::exact's empty trailing batches
    net.forward(batch.images, static_cast<int>(batch.count), /*training=*/false);
    counts[0] += net.count_correct(batch.labels);
    counts[1] += batch.count;
    if (scored) scored->insert(scored->end(), batch.samples, batch.samples + batch.count);
  }
  {
    mpi::StallWatchdog::Wait wait(run.watchdog.get());  // a rank stuck in its share is named
    run.world.allreduce_sum(counts, 2);
  }
  NOSTRUM_CHECK(counts[1] == run.plan.eval_samples, DataError,
                "evaluation scored " + std::to_string(counts[1]) + " samples, the split has " +
                    std::to_string(run.plan.eval_samples),
                run.config.data.dir + " split val");
  return static_cast<double>(counts[0]) / static_cast<double>(counts[1]);
}

}  // namespace nostrum::train
