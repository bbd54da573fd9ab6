// An ordinary shared library: no trainhost entry section.
extern "C" int not_a_plugin_answer() { return 42; }
