# Tests of nano::TorchNano and nano::nano(): included at the end of tests/runtime/CMakeLists.txt.
# One program (modes by argv[1]) so that only one more executable links torch.
add_executable(torch_nano_test ${CMAKE_CURRENT_LIST_DIR}/torch_nano_test.cc)
target_link_libraries(torch_nano_test PRIVATE nano::runtime doctest::doctest)
add_dependencies(torch_nano_test nano-run)  # the mpi backend's rank shim

set(_nano_root_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
add_test(NAME torch_nano_unit COMMAND torch_nano_test unit)
foreach(_mode a-equiv b-equiv)
  foreach(_backend subprocess mpi)
    add_test(NAME torch_nano_${_mode}_${_backend} COMMAND torch_nano_test ${_mode} ${_backend})
  endforeach()
endforeach()
foreach(_mode a-fail b-fail affinity b-auto-lr)
  add_test(NAME torch_nano_${_mode} COMMAND torch_nano_test ${_mode})
endforeach()
# Under nano-run already: train() joins the outer world instead of launching again.
add_test(NAME torch_nano_a-external_under_nano_run
  COMMAND $<TARGET_FILE:nano-run> -n 2 --backend subprocess $<TARGET_FILE:torch_nano_test> a-external)
set_tests_properties(
  torch_nano_a-equiv_subprocess torch_nano_a-equiv_mpi torch_nano_b-equiv_subprocess
  torch_nano_b-equiv_mpi torch_nano_a-fail torch_nano_b-fail torch_nano_affinity
  torch_nano_b-auto-lr torch_nano_a-external_under_nano_run
  PROPERTIES TIMEOUT 120 ENVIRONMENT "${_nano_root_env}")

# Compile-fail: the wrapper without a model must stop at the static_assert with its text.
add_executable(nano_wrapper_no_model EXCLUDE_FROM_ALL
  ${CMAKE_CURRENT_LIST_DIR}/compile_fail/nano_wrapper_no_model.cc)
target_link_libraries(nano_wrapper_no_model PRIVATE nano::runtime)
add_test(NAME nano_wrapper_compile_fail
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=nano_wrapper_no_model
          "-DEXPECT=the training function's arguments must include exactly one model"
          -P ${CMAKE_CURRENT_LIST_DIR}/compile_fail/expect_compile_failure.cmake)
set_tests_properties(nano_wrapper_compile_fail PROPERTIES TIMEOUT 300)
