# Writes OUT = "nostrum VERSION (git DESCRIBE)" at build time, only when it changed: what a job
# records in its run directory (version.txt) and what `cmake --install` puts under share/nostrum.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --tags
  OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed OR describe STREQUAL "")
  set(describe "unknown")
endif()
set(text "nostrum ${VERSION} (git ${describe})\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
