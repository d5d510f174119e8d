// trident: the executable is only the command line; everything lives in the libraries.
#include "src/app/cli.h"

int main(int argc, char** argv) { return trident::app::run_cli(argc, argv); }
