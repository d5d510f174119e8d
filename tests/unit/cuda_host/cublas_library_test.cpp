// cuBLAS and cuBLASLt are opened when the CUDA backend first needs them, not at start-up
// (kernels/cuda/cublas_library.h). Checked without a GPU, in a program linked as trident is (each
// test runs in a process of its own under CTest): nothing of cuBLAS is mapped before it is asked
// for, CPU work included; asked, every function Trident calls resolves in this machine's cuBLAS
// (a misspelt or missing name fails here, not on a GPU); a library that does not open is one line
// naming it and what to do; the configured toolkit's directory is tried after the loader's search.
#include "kernels/cuda/cublas_library.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/backend.h"       // make_backend
#include "kernels/cuda_devices.h"  // cuda_library_problem

namespace trident::kernels {
namespace {

// The files this process has mapped (/proc/self/maps), shared libraries among them.
std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}

TEST(CublasLibrary, IsOpenedOnFirstUseWithEveryFunctionTridentCalls) {
  ASSERT_FALSE(mapped_files().empty());
  EXPECT_EQ(mapped_files().find("libcublas"), std::string::npos) << "cuBLAS was loaded at start-up";
  // CPU work does not open it.
  std::unique_ptr<Backend> cpu = make_backend(Device::kCpu, 1, -1, {});
  std::vector<float> out(2 * 3), inp(2 * 4, 0.5f), weight(3 * 4, 0.25f), bias(3, 1.0f);
  cpu->matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), 2, 4, 3);
  EXPECT_FLOAT_EQ(out[0], 1.5f);
  EXPECT_EQ(mapped_files().find("libcublas"), std::string::npos) << "CPU work loaded cuBLAS";

  EXPECT_EQ(cuda_library_problem(), "");
  EXPECT_EQ(cuda::cublas_problem(), "");
  const std::string mapped = mapped_files();
  EXPECT_NE(mapped.find("libcublasLt.so"), std::string::npos);
  EXPECT_NE(mapped.find("libcublas.so"), std::string::npos);
}

TEST(CublasLibrary, ALibraryThatDoesNotOpenIsOneLineNamingIt) {
  const cuda::OpenedLibrary missing = cuda::open_library("libcublasLt.so.999", "/nonexistent/lib");
  EXPECT_EQ(missing.handle, nullptr);
  const std::string& problem = missing.problem;
  EXPECT_NE(problem.find("libcublasLt.so.999"), std::string::npos) << problem;
  EXPECT_NE(problem.find("(nor /nonexistent/lib/libcublasLt.so.999)"), std::string::npos) << problem;
  EXPECT_NE(problem.find("add its directory to LD_LIBRARY_PATH"), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
}

TEST(CublasLibrary, TheConfiguredDirectoryIsTriedAfterTheLoadersSearch) {
  // A library under a name the loader's search cannot find, in a directory of its own.
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "trident_fallback_library";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // The C++ runtime this program runs on stands in: its path from the process's own map.
  const std::string maps = mapped_files();
  const std::size_t name = maps.find("libstdc++.so");
  ASSERT_NE(name, std::string::npos);
  const std::size_t path = maps.rfind(' ', name) + 1;
  const fs::path target = maps.substr(path, maps.find('\n', name) - path);
  ASSERT_TRUE(fs::exists(target)) << target;
  fs::create_symlink(target, dir / "libtrident_fallback_test.so");
  EXPECT_EQ(cuda::open_library("libtrident_fallback_test.so", "").handle, nullptr);
  const cuda::OpenedLibrary found = cuda::open_library("libtrident_fallback_test.so", dir.string());
  EXPECT_NE(found.handle, nullptr) << found.problem;
  EXPECT_EQ(found.problem, "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace trident::kernels
