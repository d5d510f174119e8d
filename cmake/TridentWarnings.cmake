# trident_warnings(target): warnings on for our own code. Third-party headers are included as
# SYSTEM by their imported targets, so only our code is held to this.
add_library(trident_warnings INTERFACE)
target_compile_options(trident_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion>)
option(TRIDENT_WERROR "Treat warnings in Trident's own code as errors" OFF)
if(TRIDENT_WERROR)
  target_compile_options(trident_warnings INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
endif()
