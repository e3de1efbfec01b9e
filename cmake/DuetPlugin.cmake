# duet_add_plugin(NAME SOURCES ... [LIBRARIES ...])
#
# Builds the plugin library `duet-NAME.so`, the file name the Duet host looks
# for, with hidden symbols (DUET_DEFINE_PLUGIN exports the one entry point) and
# linked against Duet::duet (or the in-tree `duet` target). Inside Duet's own
# build the library lands in the build tree's plugin folder; out of tree,
# `cmake --install` puts it in DUET_PLUGIN_INSTALL_DIR, by default the
# installed Duet's own plugin folder, which `duet` searches without being
# told (docs/plugins.md#installing-and-distributing-a-plugin).
#
# Two things a plugin author would otherwise meet only at run time:
#  - an undefined symbol fails the link (-z defs), instead of a plugin that
#    builds and then cannot be loaded;
#  - without a build type, the plugin is still optimised (-O2 -DNDEBUG):
#    CMake's empty default passes no optimisation flag at all.
function(duet_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(target duet_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "duet-${name}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
  # Sanitizer runtimes come with the executable, so their symbols are
  # undefined in the plugin until it is loaded: no -z defs there.
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
    target_link_options(${target} PRIVATE "LINKER:-z,defs")
  endif()
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(NOT multi_config AND NOT CMAKE_BUILD_TYPE)
    target_compile_options(${target} PRIVATE -O2)
    target_compile_definitions(${target} PRIVATE NDEBUG)
  endif()
  if(TARGET duet)
    target_link_libraries(${target} PRIVATE duet duet_warnings ${ARG_LIBRARIES})
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${DUET_BUILD_PLUGIN_DIR})
    # Duet's own plugins, for the Python wheel to carry (python/CMakeLists.txt).
    set_property(GLOBAL APPEND PROPERTY DUET_OWN_PLUGINS ${target})
  else()
    target_link_libraries(${target} PRIVATE Duet::duet ${ARG_LIBRARIES})
    set(DUET_PLUGIN_INSTALL_DIR "${DUET_INSTALL_PLUGIN_DIR}" CACHE PATH
        "where cmake --install puts Duet plugins (default: the installed Duet's plugin folder)")
    install(TARGETS ${target} LIBRARY DESTINATION "${DUET_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
