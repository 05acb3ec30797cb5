# In-program launch (nano::TorchNano, nano::nano): included at the end of runtime/CMakeLists.txt.
# in_program_launch.cc is the only file that sees cli/launcher.h (its nano::Backend differs
# from runtime/context.h's).
target_sources(nano_runtime PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/in_program_launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/in_program.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_nano.cc
)
target_link_libraries(nano_runtime PUBLIC nano_launcher)
install(FILES
  ${CMAKE_CURRENT_LIST_DIR}/torch_nano.h
  ${CMAKE_CURRENT_LIST_DIR}/nano_wrapper.h
  ${CMAKE_CURRENT_LIST_DIR}/in_program.h
  ${CMAKE_CURRENT_LIST_DIR}/in_program_error.h
  ${CMAKE_CURRENT_LIST_DIR}/in_program_launch.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/nano/runtime)
