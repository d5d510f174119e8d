// `trident prepare`: writes token files (docs/data-format.md).
//   trident prepare synthetic --output FILE [--vocab 32 --order 2 --branching 4
//                             --tokens 2000000 --val-fraction 0.05 --seed 1234]
//   trident prepare text --output FILE [--val-fraction 0.05] INPUT...
//   trident prepare tokens --output FILE [--val FILE]... [--vocab 50257 --eot 50256 --raw uint16] INPUT...
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace trident::io {

// `args` are the words after `prepare` (args[0] is `synthetic`, `text`, `--help` or `-h`).
// Writes the file, prints what was written (or the help) to `out`, and returns 0. Throws
// UserError with one line on bad arguments or unreadable inputs; the caller prints it and
// exits with status 2. Runs in one process.
int run_prepare(const std::vector<std::string>& args, std::ostream& out);
int run_prepare(const std::vector<std::string>& args);  // prints to std::cout

}  // namespace trident::io
