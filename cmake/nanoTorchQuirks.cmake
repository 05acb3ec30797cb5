# Included before find_package(Torch), by nano's own build and by find_package(nano).
#
# Debian 13's TorchConfig (libtorch 2.6) looks for a static libkineto, which Debian does not
# ship (its profiler is built into libtorch_cpu), and warns at every find_package(Torch). Answer
# that look-up with libtorch_cpu, which is linked anyway. Debian 12's TorchConfig (libtorch 1.13)
# and the official archives do not ask; a libtorch elsewhere (Torch_DIR outside /usr/lib) and a
# kineto_LIBRARY of the user's are left alone.
if(NOT kineto_LIBRARY AND CMAKE_LIBRARY_ARCHITECTURE
   AND (NOT Torch_DIR OR Torch_DIR MATCHES "^/usr/lib/")
   AND EXISTS "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/libtorch_cpu.so")
  set(kineto_LIBRARY "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/libtorch_cpu.so" CACHE FILEPATH
      "libkineto for Debian's TorchConfig (inside libtorch_cpu there)" FORCE)
endif()
