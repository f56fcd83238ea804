# Every documented command is a test (tests/doctest.sh): one ctest per runnable fenced block of
# README.md and docs/*.md, listed at configure time (a changed doc re-runs the configure step),
# and one per command for the examples in its --help. Commands are read from the program's
# command table, so a command added later gets its test unasked.
file(GLOB TS_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/*.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TS_DOCS})
execute_process(COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doctest.sh list ${TS_DOCS}
                OUTPUT_VARIABLE TS_DOC_BLOCKS OUTPUT_STRIP_TRAILING_WHITESPACE)
string(REPLACE "\n" ";" TS_DOC_BLOCKS "${TS_DOC_BLOCKS}")
foreach(row ${TS_DOC_BLOCKS})
  string(REPLACE "\t" ";" f "${row}")
  list(GET f 0 name)
  list(GET f 1 file)
  list(GET f 2 line)
  list(GET f 3 label)
  add_test(NAME doc_${name} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doctest.sh run ${file} ${line}
                                    $<TARGET_FILE:trainsim> ${PROJECT_SOURCE_DIR})
  # Exit 77: a block marked needs=CMD whose CMD is not installed (reported as skipped).
  set_tests_properties(doc_${name} PROPERTIES TIMEOUT 300 LABELS "doc;${label}" SKIP_RETURN_CODE 77)
endforeach()

# A line that no longer opens a runnable block (the doc changed since configure) fails with a
# message saying so, not with "printed nothing" from an empty block.
add_test(NAME doctest_stale_line COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doctest.sh run
                                         ${PROJECT_SOURCE_DIR}/README.md 1 $<TARGET_FILE:trainsim>
                                         ${PROJECT_SOURCE_DIR})
set_tests_properties(doctest_stale_line PROPERTIES TIMEOUT 60 LABELS doc
                     PASS_REGULAR_EXPRESSION "README.md:1 no longer opens a block that runs trainsim")

file(GLOB_RECURSE TS_MAIN CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sim/main.c)
file(STRINGS ${TS_MAIN} TS_CMD_ROWS REGEX "{\"[a-z]+\", ts_cmd_")
foreach(row ${TS_CMD_ROWS})
  string(REGEX MATCH "{\"([a-z]+)\"" _ "${row}")
  set(cmd ${CMAKE_MATCH_1})
  add_test(NAME doc_help_${cmd} COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/doctest.sh help ${cmd}
                                        $<TARGET_FILE:trainsim> ${PROJECT_SOURCE_DIR})
  set_tests_properties(doc_help_${cmd} PROPERTIES TIMEOUT 300 LABELS doc)
endforeach()
