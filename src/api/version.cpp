#include "kiln/kiln.hpp"

namespace kiln {

const char* version() noexcept { return KILN_VERSION; }

}  // namespace kiln
