# Stamps the version and git commit into a generated header so `trident --version` and every
# checkpoint can say which build this is. The commit is read at every build, not only when
# CMake configures: an incremental build after a pull or a commit would otherwise keep naming
# the commit of the first configure. cmake/WriteBuildInfo.cmake does the reading and writes
# the header only when its text changes, so a build at the same commit recompiles nothing.
find_package(Git QUIET)
set(TRIDENT_BUILD_INFO_HEADER ${CMAKE_BINARY_DIR}/generated/trident/build_info.h)
add_custom_target(trident_build_info
  COMMAND ${CMAKE_COMMAND}
          -DGIT_EXECUTABLE=${GIT_EXECUTABLE}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${TRIDENT_BUILD_INFO_HEADER}
          -DPROJECT_VERSION=${PROJECT_VERSION}
          -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
          -DTRIDENT_BLAS_NAME=${TRIDENT_BLAS_NAME}
          -DHDF5_VERSION=${HDF5_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${TRIDENT_BUILD_INFO_HEADER}
  VERBATIM)
