// nostrum-train: MPI data-parallel training to a target accuracy with MLPerf logging.
// Run as `mpirun -n P nostrum-train ...`, `srun --mpi=pmix nostrum-train ...`, or plainly (1 rank).
#include <fstream>
#include <iostream>

#include "checkpointing.hpp"
#include "exit_status.hpp"
#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/blas_kernels.hpp"
#include "resolve.hpp"
#include "train_options.hpp"
#include "trainer.hpp"

namespace train = nostrum::train;

namespace {

// Rank 0: the --result-json file and the one-line summary of a run that trained.
void report(const train::RunResult& result, const std::string& result_json_path) {
  if (!result_json_path.empty()) {
    std::ofstream file(result_json_path);
    if (!(file << train::result_json(result) << "\n"))
      throw nostrum::IoError("cannot write the result", result_json_path);
  }
  const train::RunStatus status = result.state.status;
  if (status == train::RunStatus::kEvaluated || status == train::RunStatus::kCheckpointed) return;
  std::cout << "time-to-solution: " << result.time_to_solution << " s, status "
            << train::to_string(status) << ", " << result.epochs << " epoch(s), top-1 accuracy "
            << result.final_accuracy << ", " << result.images_per_second << " images/s, "
            << result.ranks << " rank(s) x " << result.threads << " thread(s)" << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  nostrum::kernels::select_blas_kernels(argv);  // may re-exec with OPENBLAS_CORETYPE set
  nostrum::mpi::MpiSession session(&argc, &argv);
  nostrum::mpi::Communicator world;
  try {
    train::TrainOptions options;
    if (!train::parse_train_options(argc, argv, options)) return train::kExitSuccess;  // --help
    const train::RunConfig config = train::resolve(options);
    const train::RunResult result = train::run_training(config, world);
    if (world.rank() == 0) report(result, options.result_json);
    if (options.debug_hold_at_end)
      train::hold_until_stop_signal(world, std::string("after the run (status ") +
                                               train::to_string(result.state.status) + ")");
    return train::exit_status(result.state.status);
  } catch (const train::NonFiniteError& e) {
    // Every rank agreed on it at the same step: rank 0 speaks for all, no abort needed.
    if (world.rank() == 0) std::cerr << "nostrum-train: error: " << e.what() << std::endl;
    return train::kExitNonFinite;
  } catch (const nostrum::Error& e) {
    // Option and data errors are the same on every rank: rank 0 speaks for all. Anything that can
    // differ between ranks (MPI, a rank's shard) is printed by the rank that saw it.
    const bool same_everywhere = dynamic_cast<const nostrum::OptionError*>(&e) != nullptr;
    if (!same_everywhere || world.rank() == 0)
      std::cerr << "nostrum-train: error: " << e.what() << std::endl;
    if (world.size() > 1 && !same_everywhere) world.abort(train::kExitError);
    return train::kExitError;
  } catch (const std::exception& e) {
    std::cerr << "nostrum-train: rank " << world.rank() << ": unexpected error: " << e.what()
              << std::endl;
    if (world.size() > 1) world.abort(train::kExitError);
    return train::kExitError;
  }
}
