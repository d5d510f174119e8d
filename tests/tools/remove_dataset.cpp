// remove_dataset FILE NAME: unlinks one dataset from an HDF5 file, to make a checkpoint with a
// missing tensor for tests/mpi/checkpoint_faults_test.sh. Exits 1 when it cannot.
#include <hdf5.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: remove_dataset FILE NAME\n");
    return 2;
  }
  const hid_t file = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) return 1;
  const herr_t status = H5Ldelete(file, argv[2], H5P_DEFAULT);
  return H5Fclose(file) < 0 || status < 0 ? 1 : 0;
}
