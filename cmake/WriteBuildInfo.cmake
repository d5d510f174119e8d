# Writes build_info.h (cmake/build_info.h.in) with the commit checked out now: run in script
# mode by the trident_build_info target at every build (cmake/TridentVersion.cmake).
#   cmake -DGIT_EXECUTABLE=... -DSOURCE_DIR=... -DOUTPUT=... -DPROJECT_VERSION=...
#         -DCMAKE_BUILD_TYPE=... -DTRIDENT_BLAS_NAME=... -DHDF5_VERSION=... -P WriteBuildInfo.cmake
# The commit is "unknown" outside a git clone, and gets "-dirty" when tracked files differ from
# it, so that a figure or a checkpoint made from uncommitted code does not name a commit that
# did not make it. configure_file leaves OUTPUT untouched when its text would not change.
set(TRIDENT_GIT_COMMIT "unknown")
if(GIT_EXECUTABLE AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short=12 HEAD
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0)
    set(TRIDENT_GIT_COMMIT "${_commit}")
    # --no-optional-locks: a build must not take the index lock from a git command the user
    # runs at the same time (git diff would otherwise refresh the index's stat data).
    execute_process(COMMAND "${GIT_EXECUTABLE}" --no-optional-locks diff --quiet HEAD --
                    WORKING_DIRECTORY "${SOURCE_DIR}"
                    RESULT_VARIABLE _dirty OUTPUT_QUIET ERROR_QUIET)
    if(_dirty EQUAL 1)
      string(APPEND TRIDENT_GIT_COMMIT "-dirty")
    endif()
  endif()
endif()
configure_file("${SOURCE_DIR}/cmake/build_info.h.in" "${OUTPUT}" @ONLY)
