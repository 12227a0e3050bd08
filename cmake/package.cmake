# The Debian package (`cpack -G DEB` in a release build tree): what `cmake --install` puts under
# /usr, with the dependencies dpkg-shlibdeps computes from the binaries themselves.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME synctop)
set(CPACK_PACKAGE_VENDOR "The synctop authors")
set(CPACK_PACKAGE_CONTACT "The synctop authors <synctop@users.noreply.github.com>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "find where a CUDA program's host waits for the GPU, and the line that made it wait")
set(CPACK_PACKAGE_DESCRIPTION
    "An injected CUPTI tracer (CUDA_INJECTION64_PATH: no change to the program) publishes kernel, copy,\
 memset, synchronization and host-API events over ZeroMQ; the synctop command shows them live in a\
 terminal timeline, records and replays them, reads PyTorch-profiler and Nsight Systems traces, and\
 reports which call site blocked the host, for how long, and how much GPU idle time it caused.\
 The tracer needs the CUDA driver and CUPTI (from the CUDA toolkit or the CUDA wheels) at run time.")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The tracer lives in a private directory that no other package links against.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "tmux")
include(CPack)
