// An empty Python module named mylinearops._C. Importing it makes Python
// dlopen this shared library, which runs the TORCH_LIBRARY static
// registrations in mylinearops.cpp. No pybind11: the operators are reached
// through torch.ops.mylinearops, not through this module. (The JIT build
// loads the library with torch.ops.load_library and does not need this file.)
#include <Python.h>

extern "C" {
PyMODINIT_FUNC PyInit__C(void) {
  static struct PyModuleDef module_def = {
      PyModuleDef_HEAD_INIT,
      "_C",    // name
      nullptr, // docstring
      -1,      // no per-interpreter state
      nullptr, // no methods
  };
  return PyModule_Create(&module_def);
}
}
