// Private to lib/driver: how udfc and udf-link write what they make.  Every
// output and the depfile are staged first and renamed into place together
// (lib/support/fs.h OutputFiles), so a failure -- an unwritable depfile
// folder, a full disk -- writes nothing and leaves existing files as they were.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "udf/support/depfile.h"
#include "udf/support/dynlib.h"
#include "udf/support/fs.h"

namespace udf::detail {

struct Output {
  std::string path;
  Bytes bytes;
};

/// Writes `outputs` (the first is the primary one: the depfile's default
/// name is PRIMARY.d and its default target PRIMARY) and, with -MD, the
/// depfile listing `deps`.
Expected<void> write_outputs(const std::vector<Output>& outputs, const DepfileOptions& depfile, const DependencyList& deps);

/// -MF/-MT/-MP without -MD, or -MD with nothing written, are usage errors.
Expected<void> check_depfile_options(const DepfileOptions& depfile, bool writes_output);

/// The lines of `--version`: "NAME  VERSION  PATH" or "NAME  not found: why".
std::string library_report(const std::vector<LibraryStatus>& libs);

}  // namespace udf::detail
