# Runs a libFuzzer target briefly as a test: seeds a corpus with the target's own --write-seeds
# when it has one, then fuzzes for FUZZ_SECONDS (default 20) from a fixed random seed (1; the
# environment's SYNCTOP_FUZZ_SEED picks another), so that a run repeats the one before it as far as
# the time allows: the suite fails on what a change broke, not on what chance found (fuzz longer
# and with other seeds by hand to find more). Any crash, leak or abort fails it.
if(NOT DEFINED FUZZ_SECONDS)
  set(FUZZ_SECONDS 20)
endif()
set(FUZZ_SEED 1)
if(DEFINED ENV{SYNCTOP_FUZZ_SEED})
  set(FUZZ_SEED $ENV{SYNCTOP_FUZZ_SEED})
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus)
execute_process(COMMAND ${FUZZER} --write-seeds ${WORK}/corpus RESULT_VARIABLE seed_rc
                OUTPUT_QUIET ERROR_VARIABLE seed_err)
if(NOT seed_rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} --write-seeds failed (exit ${seed_rc}):\n${seed_err}")
endif()
execute_process(COMMAND ${FUZZER} -seed=${FUZZ_SEED} -max_total_time=${FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048
                        -artifact_prefix=${WORK}/ -print_final_stats=1 ${WORK}/corpus
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(REGEX MATCH "stat::number_of_executed_units: *[0-9]+" runs "${out}")
message("${FUZZER}: ${runs}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzzer found a failure (exit ${rc}); artifacts in ${WORK}\n${out}")
endif()
if(runs STREQUAL "")
  message(FATAL_ERROR "fuzzer did not run:\n${out}")
endif()
