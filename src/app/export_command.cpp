// trident export CHECKPOINT OUT: the model weights of a training checkpoint, without the
// optimizer state, as one parameter file of whole tensors for use elsewhere (docs/export.md).
//
// The checkpoint's saved deck says which model it holds, so the tensor list is the parameter
// table of that model on one rank (tp = 1, pp = 1): the same names and shapes as training
// uses, never a list kept by hand. The vocabulary is not padded, so `wte` comes out
// [vocab, C] whatever tensor-parallel size wrote the checkpoint (its padding rows are zero and
// belong to no token).
//
// The work is serial: under mpirun rank 0 does it (with MPI_COMM_SELF for the HDF5 files) while
// the other ranks wait for its verdict, so every rank exits with the same status and message.
#include <fcntl.h>     // open
#include <mpi.h>
#include <sys/file.h>  // flock
#include <unistd.h>    // close

#include <cerrno>
#include <cstdint>
#include <cstring>  // std::strerror
#include <cstdio>
#include <filesystem>
#include <map>
#include <new>  // std::bad_alloc
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "io/deck.h"        // parse_deck, to_run_config
#include "io/file_kind.h"   // special_file_kind
#include "io/param_file.h"  // read_param_slices, write_param_file, read_param_file_*_attribute(s)
#include "io/path_lookup.h"
#include "io/user_error.h"
#include "kernels/out_of_memory.h"  // mib
#include "mpi_support/mpi_process.h"  // duplicate
#include "parallel/comm.h"  // agree_on_error
#include "parallel/mpi_comm.h"
#include "src/app/commands.h"
#include "src/app/run_setup.h"  // gpt_config
#include "src/model/gpt.h"      // build_gpt_param_table
#include "src/train/checkpoint_files.h"  // checkpoint_metadata_problem

namespace trident::app {

namespace {

constexpr const char* kExportUsage =
    "usage: trident export CHECKPOINT OUT\n"
    "\n"
    "Writes the model weights of a training checkpoint (no optimizer state) to OUT, an HDF5\n"
    "parameter file with every tensor whole and wte cut to the real vocabulary, whatever layout\n"
    "wrote the checkpoint. Runs on one process; under mpirun rank 0 does the work.\n"
    "Format, tensor names and shapes, and loading it in Python: docs/export.md.\n"
    "\n"
    "example:\n"
    "  trident export run/checkpoints/step-000001000.h5 model.h5\n";

struct ExportSummary {
  std::size_t tensors = 0;
  int64_t parameters = 0;
  int64_t step = 0;
};

// The model the checkpoint holds, from its saved deck, with an unpadded vocabulary.
model::GptConfig checkpoint_model(const std::string& checkpoint, const std::string& deck_text) {
  const io::ResolvedDeck deck = io::parse_checkpoint_deck(deck_text, checkpoint);
  model::GptConfig config = gpt_config(io::to_run_config(deck));
  config.padded_vocab = config.vocab;
  return config;
}

// Reads the checkpoint and writes OUT; one process, serial. Throws UserError naming the file.
ExportSummary export_checkpoint(const std::string& checkpoint, const std::string& out) {
  std::error_code ec;
  // A path that cannot be looked up (a directory on the way that cannot be searched) says why,
  // not "no such file".
  if (const io::PathLookup lookup = io::look_up_path("checkpoint", checkpoint); !lookup.problem.empty()) {
    throw io::UserError(lookup.problem);
  }
  if (std::filesystem::is_directory(checkpoint, ec)) {
    throw io::UserError("checkpoint '" + checkpoint + "' is a directory: give one of its step-N.h5 files");
  }
  if (!std::filesystem::is_regular_file(checkpoint, ec)) {
    const std::string kind = io::special_file_kind(checkpoint);
    throw io::UserError("checkpoint '" + checkpoint + "': " + (kind.empty() ? "no such file" : "is " + kind + ", not a regular file"));
  }
  if (out.empty()) throw io::UserError("OUT is empty (an unset variable?): give the file to write");
  if (std::filesystem::is_directory(out, ec)) {
    throw io::UserError("OUT '" + out + "' is a directory: give the file to write (e.g. '" +
                        (std::filesystem::path(out) / "model.h5").string() + "')");
  }
  if (std::filesystem::exists(out, ec) && std::filesystem::equivalent(checkpoint, out, ec)) {
    throw io::UserError("OUT '" + out + "' is the checkpoint itself: exporting into it would replace it");
  }
  // OUT is written as OUT.tmp, then renamed.
  if (std::filesystem::exists(out + ".tmp", ec) && std::filesystem::equivalent(checkpoint, out + ".tmp", ec)) {
    throw io::UserError("checkpoint '" + checkpoint + "' is " + out + ".tmp, the name the export is written under " +
                        "before it is renamed to OUT: it would be overwritten (choose another OUT)");
  }
  // An existing OUT is replaced only when it is a parameter file (an earlier export), never a
  // deck, a token dataset or any other file a mistyped OUT may name.
  if (std::filesystem::exists(out, ec)) {
    bool earlier_export = false;
    try {
      earlier_export = io::read_param_file_string_attribute(out, "source").has_value();  // exports name theirs
    } catch (const io::UserError&) {
      earlier_export = false;
    }
    if (!earlier_export) {
      throw io::UserError("OUT '" + out + "' exists and is not an earlier export; it is left as it is (remove it, " +
                          "or choose another OUT)");
    }
  }
  // Refuses a file that is not a parameter file (a token dataset, any other HDF5 file).
  const std::optional<std::string> deck_text = io::read_param_file_string_attribute(checkpoint, "deck");
  if (!deck_text) {
    throw io::UserError("'" + checkpoint + "' has no 'deck' attribute, so it is not a checkpoint "
                        "(final-params.h5 cannot be exported: use a file of checkpoint.dir)");
  }
  // A corrupt checkpoint must not become a model someone deploys.
  if (const std::string reason = io::verify_param_file(checkpoint, MPI_COMM_SELF); !reason.empty()) {
    throw io::UserError("cannot export: " + reason);
  }
  if (const std::string problem = train::checkpoint_metadata_problem(checkpoint); !problem.empty()) {
    throw io::UserError("cannot export: " + problem);
  }
  const auto attributes = io::read_param_file_int_attributes(checkpoint);
  const auto step = attributes.find("step");
  if (step == attributes.end()) throw io::UserError("checkpoint '" + checkpoint + "': no step attribute");
  const model::GptConfig config = checkpoint_model(checkpoint, *deck_text);
  const auto vocab = attributes.find("vocab");
  if (vocab != attributes.end() && vocab->second != config.vocab) {
    throw io::UserError("checkpoint '" + checkpoint + "': its vocab attribute " +
                        std::to_string(vocab->second) + " differs from model.vocab = " + std::to_string(config.vocab) +
                        " of its deck");
  }

  // One rank holding every tensor whole: the table's offsets index one host arena.
  const model::ParamTable table = model::build_gpt_param_table(config);
  std::vector<io::TensorSliceRead> reads;
  for (const model::ParamTensor& t : table.tensors()) {
    // wte is stored [padded vocab, C]: read_param_slices reads the first `vocab` rows of it, which
    // the file must hold.
    reads.push_back({t.spec.name, t.spec.global_shape, -1, 0, 0, nullptr});
    if (t.spec.name == "wte") reads.back().rows_required = config.vocab;
  }
  // The deck's model against the file's tensors before the memory is taken: a deck that names
  // another model (one edited to hidden = 65536) asked for all of that first, and ended in
  // std::bad_alloc as an internal error.
  const std::map<std::string, std::vector<int64_t>> stored = io::list_param_file(checkpoint);
  for (const io::TensorSliceRead& r : reads) {
    const auto found = stored.find(r.name);
    const std::string problem = found == stored.end() ? "tensor '" + r.name + "' is missing, which its deck's model has"
                                                      : io::stored_shape_problem(r, found->second);
    if (!problem.empty()) throw io::UserError("checkpoint '" + checkpoint + "': " + problem);
  }
  std::vector<float> weights;
  try {
    weights.resize(table.total_count());
  } catch (const std::bad_alloc&) {
    throw io::UserError("export holds the whole model in host memory, " + kernels::mib(table.total_count() * sizeof(float)) +
                        ", which this machine could not allocate: export on a machine with more memory");
  }
  std::vector<io::TensorSlice> writes;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const model::ParamTensor& t = table.tensors()[i];
    reads[i].data = weights.data() + t.offset;
    writes.push_back({t.spec.name, t.spec.global_shape, -1, 0, 0, reads[i].data, true});
  }
  io::read_param_slices(checkpoint, MPI_COMM_SELF, reads);
  // As prepare does for its --output: a models/ directory that does not exist yet is made.
  if (const std::filesystem::path parent = std::filesystem::path(out).parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) throw io::UserError("OUT '" + out + "': cannot create its directory (" + ec.message() + ")");
  }
  // Two exports into one OUT at once would write one OUT.tmp together, and one of them rename a
  // mix of both to OUT with exit 0: the writer holds a lock on OUT.tmp until the rename.
  const std::string temporary = out + ".tmp";
  const int lock = ::open(temporary.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) {
    throw io::UserError("OUT '" + out + "': cannot create " + temporary + " (" + std::strerror(errno) + ")");
  }
  if (::flock(lock, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    ::close(lock);
    throw io::UserError("OUT '" + out + "' is being written by another export (" + temporary + " is locked): " +
                        "wait for it, or choose another OUT");
  }
  struct CloseLock {
    int fd;
    ~CloseLock() { ::close(fd); }
  } const close_lock{lock};
  io::write_param_file(out, MPI_COMM_SELF, writes,
                       {{"step", step->second},
                        {"vocab", config.vocab},
                        {"layers", config.layers},
                        {"heads", config.heads},
                        {"hidden", config.hidden},
                        {"context", config.context}},
                       {{"deck", *deck_text}, {"source", checkpoint}});
  return {table.tensors().size(), static_cast<int64_t>(table.total_count()), step->second};
}

}  // namespace

int export_command(const std::vector<std::string>& args) {
  parallel::MpiComm world(mpi_support::duplicate(MPI_COMM_WORLD), "world");
  // The arguments are the same on every rank: these checks fail everywhere alike.
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      if (world.rank() == 0) std::printf("%s", kExportUsage);
      return 0;
    }
    if (a.rfind("--", 0) == 0) {
      throw io::UserError("trident export: unknown option '" + a + "' (see trident export --help)");
    }
  }
  if (args.size() != 2) {
    throw io::UserError("trident export: expected 2 arguments, CHECKPOINT and OUT, got " + std::to_string(args.size()) +
                        " (usage: trident export CHECKPOINT OUT)");
  }
  const std::string& checkpoint = args[0];
  const std::string& out = args[1];

  std::string error;
  bool abandoned = false;  // the write failed with OUT left open: no MPI_Finalize (io/user_error.h)
  ExportSummary summary;
  if (world.rank() == 0) {
    try {
      summary = export_checkpoint(checkpoint, out);
    } catch (const io::CollectiveWriteAbandoned& e) {
      error = e.what();
      abandoned = true;
    } catch (const io::UserError& e) {
      error = e.what();
    }
  }
  error = parallel::agree_on_error(world, error);  // also the other ranks' wait for rank 0
  if (!error.empty() && world.all_reduce_max(abandoned ? 1 : 0) == 1) throw io::CollectiveWriteAbandoned(error);
  if (!error.empty()) throw io::UserError(error);
  if (world.rank() == 0) {
    std::printf("export: %zu tensors, %lld parameters (%.1f MB) from %s at step %lld -> %s\n", summary.tensors,
                static_cast<long long>(summary.parameters), 4.0 * static_cast<double>(summary.parameters) / 1e6,
                checkpoint.c_str(), static_cast<long long>(summary.step), out.c_str());
  }
  return 0;
}

}  // namespace trident::app
