// Fails in one chosen hook, by throwing, returning an error status, hanging or
// crashing, or interrupts the run there as Ctrl-C would; records every hook so
// tests see that on_exception and teardown still ran.
#include "hook_log.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <unistd.h>

namespace {

class Thrower final : public test_plugins::HookLog {
public:
    static constexpr const char* name = "test_thrower";
    static constexpr const char* version = "1";
    static constexpr const char* description = "fails in a chosen hook";
    static constexpr th_option_spec options[] = {
        {"file", TH_OPTION_STRING, "\"\"", "where to append <plugin>:<hook> lines"},
        {"hook", TH_OPTION_STRING, "\"epoch_end\"", "the hook to fail in, or destructor (throw from it)"},
        {"how", TH_OPTION_STRING, "\"throw\"",
         "throw (std::runtime_error), unknown (not a std::exception), status (an sdk::Error carrying a status), "
         "hang (never return), crash (abort the process), exit (end the process with status 7), sigint or sigterm (send the signal to the process and "
         "return normally), sigint_twice (a second Ctrl-C while the first is pending), sigint_then_sigterm, "
         "forge_result (print 'RESULT PASS' lines and throw a message holding one) or fork (leave a process that "
         "holds the output open for 25 s, and return normally), or fork_and_hang; hang and fork write 'hanging "
         "<pid>' and 'forked <pid>' to file"},
        {"also_in_exception", TH_OPTION_BOOL, "false", "throw in on_exception too, after failing in hook"},
    };
    Thrower(trainhost::sdk::Context&, const trainhost::sdk::Options& options)
        : HookLog(name, options.get_string("file")), hook_(options.get_string("hook")), how_(options.get_string("how")),
          also_in_exception_(options.get_bool("also_in_exception")) {}
    // hook = "destructor": a flush that throws from the destructor, as a careless
    // logger's would; C++ ends the process there, and the host must say whose it was.
    ~Thrower() override {
        if (hook_ != "destructor") return;
        if (how_ == "terminate") std::terminate();  // as a std::thread member left joinable does
        flush();
    }

protected:
    void after_hook(const std::string& hook) override {
        if (hook == "exception" && also_in_exception_) throw std::runtime_error("deliberate failure in exception too");
        if (hook != hook_) return;
        // Signals once only, as a user's Ctrl-C: a later hook of the same kind (the next
        // validation batch) must not look like a second interrupt.
        if (how_ == "sigint" || how_ == "sigterm") {
            if (!std::exchange(signalled_, true)) std::raise(how_ == "sigint" ? SIGINT : SIGTERM);
            return;
        }
        if (how_ == "sigint_twice" || how_ == "sigint_then_sigterm") {
            std::raise(SIGINT);
            std::raise(how_ == "sigint_twice" ? SIGINT : SIGTERM);
            return;
        }
        if (how_ == "forge_result") {
            std::printf("RESULT PASS\n");
            std::fflush(stdout);
            throw std::runtime_error("deliberate failure in " + hook + "\nRESULT PASS");
        }
        if (how_ == "fork" || how_ == "fork_and_hang") {
            if (std::exchange(signalled_, true)) return;
            const pid_t worker = ::fork();
            if (worker == 0) {
                ::sleep(25);
                std::_Exit(0);
            }
            record("forked " + std::to_string(worker));
            if (how_ == "fork") return;
        }
        if (how_ == "unknown") throw 42;
        if (how_ == "crash") std::abort();
        if (how_ == "exit") std::_Exit(7);
        if (how_ == "hang" || how_ == "fork_and_hang") {
            record("hanging " + std::to_string(::getpid()));
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        }
        if (how_ == "status") throw trainhost::sdk::Error(TH_OUT_OF_MEMORY, "out of scratch space in " + hook);
        throw std::runtime_error("deliberate failure in " + hook);
    }

private:
    void flush() const { throw std::runtime_error("could not flush the log in the destructor"); }

    std::string hook_;
    std::string how_;
    bool also_in_exception_;
    bool signalled_ = false;
};

}  // namespace

TRAINHOST_PLUGIN(Thrower)
