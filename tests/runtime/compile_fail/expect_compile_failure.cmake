# cmake -DBUILD_DIR=... -DTARGET=... -DEXPECT=... -P expect_compile_failure.cmake
# Builds TARGET (excluded from `all`) and passes only when the build fails with EXPECT in
# the compiler's output: a compile-fail test that checks the message, not just the failure.
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not")
endif()
string(FIND "${out}" "${EXPECT}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${TARGET} failed without the expected message \"${EXPECT}\":\n${out}")
endif()
message(STATUS "${TARGET} failed to compile with \"${EXPECT}\", as it must")
