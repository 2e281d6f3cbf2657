# Writes OUT (common/version_gen.h) from the project version and, where the
# source is a git checkout, `git describe`; run at every build (the root
# CMakeLists' ddpipe_version target). configure_file leaves OUT untouched
# when the text is the same, so an unchanged tree rebuilds nothing.
# In: SRC (source dir), OUT (header path), VERSION (project version).
set(DDPIPE_GIT_DESCRIBE "")
find_program(GIT_EXECUTABLE git)
if(GIT_EXECUTABLE AND EXISTS ${SRC}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --tags
    WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE DDPIPE_GIT_DESCRIBE
    RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT rc EQUAL 0)
    set(DDPIPE_GIT_DESCRIBE "")
  endif()
endif()
set(DDPIPE_VERSION ${VERSION})
configure_file(${SRC}/common/version_gen.h.in ${OUT} @ONLY)
