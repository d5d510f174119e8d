# Stamps the version and git commit into a generated header so `trident --version` can say
# which build this is. The commit is read at configure time; "unknown" outside a git clone.
find_package(Git QUIET)
set(TRIDENT_GIT_COMMIT "unknown")
if(GIT_FOUND AND EXISTS ${CMAKE_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE _commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0)
    set(TRIDENT_GIT_COMMIT ${_commit})
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/build_info.h.in
               ${CMAKE_BINARY_DIR}/generated/trident/build_info.h @ONLY)
