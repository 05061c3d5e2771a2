// SbpOpInterface definitions.
#include "dialects/Sbp/IR/SbpInterfaces.h"

#include "dialects/Sbp/IR/SbpInterfaces.cpp.inc"
