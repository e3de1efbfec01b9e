# duet_add_plugin(NAME SOURCES ...)
#
# Builds the plugin library `duet-NAME.so`, the file name the Duet host looks
# for, with hidden symbols (DUET_DEFINE_PLUGIN exports the one entry point) and
# linked against Duet::duet (or the in-tree `duet` target). Inside Duet's own
# build the library lands in the build tree's plugin folder.
function(duet_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(target duet_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "duet-${name}"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
    CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
  if(TARGET duet)
    target_link_libraries(${target} PRIVATE duet duet_warnings ${ARG_LIBRARIES})
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${DUET_BUILD_PLUGIN_DIR})
  else()
    target_link_libraries(${target} PRIVATE Duet::duet ${ARG_LIBRARIES})
  endif()
endfunction()
