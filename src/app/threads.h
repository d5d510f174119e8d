// How many threads a rank uses when the deck leaves run.threads = 0: the CPUs this process may
// run on, shared fairly among the ranks of its node, so BLAS and OpenMP never oversubscribe a
// node by default. (mpirun binding a rank to one core gives 1; an unbound rank gets
// node cores / ranks on the node.)
#pragma once

namespace trident::app {

int default_threads(int ranks_on_node);

}  // namespace trident::app
