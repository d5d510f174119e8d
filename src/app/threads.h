// How many threads a rank uses when the deck leaves run.threads = 0: the CPUs this process may
// run on, shared fairly among the ranks of its node, so BLAS and OpenMP never oversubscribe a
// node by default. (mpirun binding a rank to one core gives 1; an unbound rank gets
// node cores / ranks on the node.)
#pragma once

#include <string>

namespace trident::app {

int default_threads(int ranks_on_node);

// A note for rank 0 when mpirun's CPU binding (Open MPI binds each rank to one core when it
// starts one or two) leaves a rank fewer CPUs than its fair share of the node, so default_threads
// gives fewer threads than the node could run: how to unbind. "" otherwise, and under any other
// launcher (srun's binding follows the job's allocation, which the node's size does not show).
std::string binding_note(int ranks_on_node);

}  // namespace trident::app
