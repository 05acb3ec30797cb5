# Script mode (cmake -P): install, configure and build the consumer, run it with 2 ranks.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${NANO_BUILD_DIR} --prefix ${prefix})
# Only the public headers are installed: include/nano/*.h.
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/*)
foreach(h IN LISTS installed_headers)
  if(NOT h MATCHES "^nano/[a-z_0-9]+\\.h$")
    message(FATAL_ERROR "installed a header outside the public surface: include/${h}")
  endif()
endforeach()
list(FIND installed_headers "nano/nano.h" umbrella)
if(umbrella EQUAL -1)
  message(FATAL_ERROR "include/nano/nano.h was not installed")
endif()
# Configured as users of an official libtorch archive do: Torch_DIR names libtorch's CMake
# folder (here the one nano was built against) instead of the default search. A healthy
# configure prints no CMake warning on either Debian release.
# The build's compiler launcher ('|' for ';'), one argument (quoted: its ';' stay inside).
string(REPLACE "|" ";" launcher "${CONSUMER_LAUNCHER}")
if(NOT launcher)
  set(launcher "")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=Release
                        -DCMAKE_PREFIX_PATH=${prefix} -DTorch_DIR=${TORCH_DIR}
                        "-DCMAKE_CXX_COMPILER_LAUNCHER=${launcher}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed (${rc}):\n${out}\n${err}")
endif()
if(err MATCHES "CMake Warning")
  message(FATAL_ERROR "consumer configure warned:\n${err}")
endif()
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${prefix}/bin/nano-run -n 2 --backend subprocess --output-ranks 0 --no-tag-output
    ${WORK_DIR}/build/train)
# The nano torch backend, where it was built: installed under <prefix>/lib/nano/python, which
# the installed nano-run puts on its ranks' PYTHONPATH (none is set here).
if(TORCH_PYTHON)
  set(module ${prefix}/lib/nano/python/nano_torch/__init__.py)
  if(NOT EXISTS ${module})
    message(FATAL_ERROR "the nano torch backend was built but not installed: no ${module}")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH ${prefix}/bin/nano-run -n 2 --backend subprocess
            --output-ranks 0 --no-tag-output ${TORCH_PYTHON} -c
            "import torch.distributed as dist, nano_torch; dist.init_process_group('nano'); print('imported', nano_torch.__file__)"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "imported ${module}")
    message(FATAL_ERROR "installed nano-run did not find the installed nano_torch (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "installed nano_torch imported under the installed nano-run: ${module}")
endif()
