# Helpers shared by every CMakeLists.txt of the project.

# meshsplit_add_library(NAME DIR dir DEPS deps...)
# Builds every *.cc in DIR except *_test.cc into a static library. Includes are
# rooted at src/, so code writes #include "ir/shape.h".
function(meshsplit_add_library name)
  cmake_parse_arguments(ARG "" "DIR" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/${ARG_DIR}/*.cc)
  list(FILTER srcs EXCLUDE REGEX "_test\\.cc$")
  list(SORT srcs)
  if(NOT srcs)  # a module that has no code yet still links
    set(srcs ${PROJECT_BINARY_DIR}/empty_${name}.cc)
    file(WRITE ${srcs} "// empty module\n")
  endif()
  add_library(${name} STATIC ${srcs})
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# meshsplit_static_closure(OUT target): `target` and every static library of
# the project it links, directly or through others, in breadth-first order.
# Imported libraries (system packages) are left out.
function(meshsplit_static_closure out target)
  set(seen)
  set(todo ${target})
  while(todo)
    list(POP_FRONT todo t)
    if(NOT TARGET ${t} OR t IN_LIST seen)
      continue()
    endif()
    get_target_property(type ${t} TYPE)
    get_target_property(imported ${t} IMPORTED)
    if(imported OR NOT type STREQUAL "STATIC_LIBRARY")
      continue()
    endif()
    list(APPEND seen ${t})
    get_target_property(deps ${t} LINK_LIBRARIES)
    if(deps)
      list(APPEND todo ${deps})
    endif()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# meshsplit_add_test(NAME SOURCES srcs... DEPS deps... [LABELS labels...])
# One GoogleTest binary, registered with CTest test by test.
function(meshsplit_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
      MESHSPLIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
      MESHSPLIT_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
include(GoogleTest)
