// nostrum-train: MPI data-parallel training to a target accuracy with MLPerf logging.
// Run as `mpirun -n P nostrum-train ...`, `srun --mpi=pmix nostrum-train ...`, or plainly (1 rank).
#include <mpi.h>

#include <fstream>
#include <iostream>

#include "checkpointing.hpp"
#include "mpi/communicator.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/kernels/blas_kernels.hpp"
#include "resolve.hpp"
#include "train_options.hpp"
#include "trainer.hpp"

int main(int argc, char** argv) {
  nostrum::kernels::select_blas_kernels(argv);  // may re-exec with OPENBLAS_CORETYPE set
  nostrum::mpi::MpiSession session(&argc, &argv);
  nostrum::mpi::Communicator world;
  try {
    nostrum::train::TrainOptions options;
    if (!nostrum::train::parse_train_options(argc, argv, options)) return 0;  // --help
    const nostrum::train::RunConfig config = nostrum::train::resolve(options);
    const nostrum::train::RunResult result = nostrum::train::run_training(config, world);
    if (world.rank() == 0) {
      const std::string json = nostrum::train::result_json(result);
      if (!options.result_json.empty()) {
        std::ofstream file(options.result_json);
        if (!(file << json << "\n"))
          throw nostrum::IoError("cannot write the result", options.result_json);
      }
      if (result.status != "evaluated" && result.status != "checkpointed")
        std::cout << "time-to-solution: " << result.time_to_solution << " s, status "
                  << result.status << ", " << result.epochs << " epoch(s), top-1 accuracy "
                  << result.final_accuracy << ", " << result.images_per_second << " images/s, "
                  << result.ranks << " rank(s) x " << result.threads << " thread(s)" << std::endl;
    }
    if (result.status == "checkpointed") return nostrum::train::kExitCheckpointed;
    return result.status == "aborted" ? nostrum::train::kExitTargetMissed
                                      : nostrum::train::kExitSuccess;
  } catch (const nostrum::train::NonFiniteError& e) {
    // Every rank agreed on it at the same step: rank 0 speaks for all, no abort needed.
    if (world.rank() == 0) std::cerr << "nostrum-train: error: " << e.what() << std::endl;
    return nostrum::train::kExitNonFinite;
  } catch (const nostrum::Error& e) {
    // Option and data errors are the same on every rank: rank 0 speaks for all. Anything that can
    // differ between ranks (MPI, a rank's shard) is printed by the rank that saw it.
    const bool same_everywhere = dynamic_cast<const nostrum::OptionError*>(&e) != nullptr;
    if (!same_everywhere || world.rank() == 0)
      std::cerr << "nostrum-train: error: " << e.what() << std::endl;
    if (world.size() > 1 && !same_everywhere) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "nostrum-train: rank " << world.rank() << ": unexpected error: " << e.what()
              << std::endl;
    if (world.size() > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
