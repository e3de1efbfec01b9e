// compare_output.h — an experiment's results as tables for a person, and as
// JSON and CSV for tools (the JSON's schema is documented in docs/compare.md
// and read by core/compare/report_page.py).
#pragma once

#include <ostream>
#include <string>

#include "compare_run.h"
#include "duet/app/experiment.h"

namespace duet::compare {

void print_tables(std::ostream& out, const Experiment& e, const CompareResult& r);
std::string compare_json(const Experiment& e, const CompareResult& r);
// One row per variant: its speed medians, peak RSS and fidelity figures.
std::string compare_csv(const Experiment& e, const CompareResult& r);

}  // namespace duet::compare
