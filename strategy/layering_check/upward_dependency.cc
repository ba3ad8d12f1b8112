// Never builds: strategy/ may not use model/ (see BUILD).
#include "model/sequential.h"
